"""BFCL's loader, prompt texts, call grammar, request path, and the gold replay over the real data."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

from grading.scorers.bfcl import grade
from inference.benchmarks.bfcl.data import AST_CATEGORIES, gold_answer, load_bfcl, python_calls
from inference.benchmarks.bfcl.grammar import call_grammar
from inference.benchmarks.bfcl.texts import OWN, PROMPTS_FILE, UTILS_FILE, resolve
from inference.errors import ConfigError, DatasetError
from tests.conftest import REPO
from tests.gold_coverage import assert_documented
from tests.inference.test_config import _validate
from tests.inference.test_end_to_end import run_toolsweep

DEFECTS = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_507-149-4", "live_multiple_964-207-0",
           "live_multiple_862-181-3", "parallel_multiple_26"}
"""The gold answers BFCL's checker fails (data/bfcl SOURCE.md): a required parameter the possible
answer lacks, a parameter the function does not declare."""
COUNTS = {"simple_python": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240,
          "live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24,
          "live_irrelevance": 884, "live_relevance": 16}
PROBES = json.loads((REPO / "tests" / "grading" / "data" / "bfcl_probes.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((REPO / "tests" / "grading" / "data" / "bfcl_reference_verdicts.json").read_text(encoding="utf-8"))

# Stand-ins for BFCL's two files, in their structure with toolsweep's own words.
STAND_IN_PROMPTS = '''
OUTPUT_FORMAT_MAPPING = {"python": "[f(a=1)]", "json": "{}"}
PARAM_TYPE_MAPPING = {"python": "", "json": "types"}
PROMPT_STYLE_TEMPLATES = {"classic": {"persona": "P.", "task": "T.", "tool_call_no_tag": "Use {output_format}.{param_types}",
    "tool_call_with_tag": "Tag {output_format}", "multiturn_behavior": "M.", "available_tools": "Docs ({format}):\\n{functions}\\n"}}
_PLAIN = "{persona}{task}|{tool_call_format}|{multiturn_behavior}|{available_tools}"
PROMPT_TEMPLATE_MAPPING = {"plaintext": _PLAIN}
DEFAULT_SYSTEM_PROMPT_FORMAT = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
UNUSED = "x" + "y"
'''
STAND_IN_UTILS = '''
def _get_language_specific_hint(test_category):
    if test_category == "java":
        return " Java."
    else:
        return " Py."
'''
FUNCTIONS = [{"name": "f", "description": "Does é.", "parameters": {"type": "dict", "properties": {}, "required": []}}]


def _stand_in(root: Path) -> Path:
    for name, text in ((PROMPTS_FILE, STAND_IN_PROMPTS), (UTILS_FILE, STAND_IN_UTILS)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_texts_are_read_from_a_copy_and_composed_as_bfcl_composes_them(tmp_path):
    texts = resolve("auto", str(_stand_in(tmp_path / "site")), "")
    system = texts.system(FUNCTIONS, None)
    docs = json.dumps([{**FUNCTIONS[0], "description": "Does é. Py."}], indent=4)
    assert system == f"P.T.|Use [f(a=1)].|M.|Docs (json):\n{docs}\n"
    assert "\\u00e9" in system  # BFCL's json.dumps escapes non-ASCII
    assert texts.system(FUNCTIONS, "Own rules.").endswith(f"{docs}\n\n\nOwn rules.")
    assert texts.facts()["texts"] == "upstream" and set(texts.facts()["sha256"]) == {PROMPTS_FILE, UTILS_FILE}
    # the bfcl_eval folder itself, and the wheel
    assert resolve("upstream", str(tmp_path / "site" / "bfcl_eval"), "").template == texts.template
    wheel = tmp_path / "bfcl_eval-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in (PROMPTS_FILE, UTILS_FILE):
            archive.write(tmp_path / "site" / name, name)
    assert resolve("upstream", str(wheel), "").template == texts.template


def test_without_a_copy_auto_uses_toolsweeps_wording_and_upstream_refuses(tmp_path):
    assert resolve("auto", None, str(tmp_path)) is OWN
    with pytest.raises(DatasetError, match="dataset.bfcl_eval"):
        resolve("upstream", None, str(tmp_path))
    broken = _stand_in(tmp_path / "broken")
    (broken / PROMPTS_FILE).write_text(STAND_IN_PROMPTS.replace("PROMPT_STYLE_TEMPLATES", "STYLES"), encoding="utf-8")
    with pytest.raises(DatasetError, match="lacks"):
        resolve("auto", str(broken), "")


def test_system_prompts_equal_bfcls_own_byte_for_byte(bfcl_eval_copy):
    """BFCL's system turns (their SHA-256, from scripts/bfcl_reference_verdicts.py) for every probe case."""
    import hashlib

    texts = resolve("upstream", bfcl_eval_copy, "")
    for name, case in PROBES["cases"].items():
        for own in (None, "Answer in French."):
            digest = hashlib.sha256(texts.system(case["function"], own).encode("utf-8")).hexdigest()
            assert digest == REFERENCE["system_prompts"][f"{name}{'+own' if own else ''}"], name


def test_grammar_without_functions_allows_only_no_call():
    assert call_grammar([], 8).strip() == 'start: "[" "]"'


def test_grammar_keeps_declaration_order_and_requires_required_parameters():
    import lark  # noqa: F401  (vLLM's dependency: the grammar's own parser checks it below)
    import lark

    grammar = call_grammar(PROBES["cases"]["weather"]["function"], 2)
    parser = lark.Lark(grammar)
    for text in ("[]", "[weather.get(city='Paris')]", "[weather.get(city='Paris', days=3), weather.alerts(region='x')]"):
        parser.parse(text)
    for text in ("[weather.get(days=3)]", "[weather.get(days=3, city='Paris')]", "[weather.get(city='a', city='b')]",
                 "[weather.get(city='a'), weather.get(city='b'), weather.get(city='c')]", "[nope(city='a')]"):
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(text)


@pytest.fixture(scope="module")
def bfcl_table(bfcl_data) -> pl.DataFrame:
    """The whole real set, loaded once for the tests that read it."""
    return load_bfcl(bfcl_data, AST_CATEGORIES)


@pytest.mark.shared_data
def test_real_files_load_with_bfcls_counts_and_turns(bfcl_table):
    table = bfcl_table
    assert dict(table.group_by("setting", maintain_order=True).len().rows()) == COUNTS
    history = table.filter(pl.col("bfcl_id") == "live_irrelevance_125-11-0").row(0, named=True)
    assert [m["role"] for m in json.loads(history["prior_turns"])] == ["user", "assistant"]
    assert history["native_system"] and history["system"].endswith("\n\n" + history["native_system"])
    assert table["prior_turns"].drop_nulls().len() == 9 and table["native_system"].drop_nulls().len() == 92
    bare = table.filter(pl.col("tools") == "[]")
    assert bare.height == 4 and set(bare["grammar"].str.strip_chars()) == {'start: "[" "]"'}


@pytest.mark.shared_data
@pytest.mark.parametrize("fmt", ["benchmark", "native"])
def test_gold_of_every_case_scores_one_but_the_known_defects(bfcl_table, fmt):
    """Every case, its gold answer (first acceptable values) in BFCL's call syntax or Hermes
    blocks, graded in-process: right everywhere except the data's known defects."""
    wrong = set()
    for row in bfcl_table.iter_rows(named=True):
        row.update(output=gold_answer(row, fmt, "hermes"), failure=None, prompt_format=fmt, calls=None)
        if not grade("official", row)["correct"]:
            wrong.add(row["bfcl_id"])
    assert wrong == DEFECTS


@pytest.mark.shared_data
def test_gold_answers_are_inside_the_grammar(bfcl_table):
    """xgrammar, the backend that applies the grammar, accepts the gold answers (the first 15 of
    each category; defects whose gold lacks a required parameter are outside it by design, and
    live_relevance's stand-in gold, a call without arguments, is no possible answer)."""
    from xgrammar import Grammar
    from xgrammar.testing import _is_grammar_accept_string  # xgrammar's own string matcher

    table = bfcl_table.filter(pl.int_range(pl.len()).over("setting") < 15, pl.col("setting") != "live_relevance",
                              ~pl.col("bfcl_id").is_in(DEFECTS))
    assert table.height == 150
    for row in table.iter_rows(named=True):
        answer = gold_answer(row, "benchmark", "hermes")
        assert _is_grammar_accept_string(Grammar.from_lark(row["grammar"]), answer), (row["bfcl_id"], answer)


@pytest.mark.shared_data
def test_replaying_real_gold_through_the_cli(tmp_path, bfcl_data):
    """`toolsweep gold` then engine=replay over the whole set: 1.0 per category but those holding a
    known defect, the pooled summary rows present."""
    from inference.gold import main as gold_main

    preds = tmp_path / "gold.jsonl"
    gold_main([str(bfcl_data), str(preds), "--dataset", "bfcl"])
    done = run_toolsweep(tmp_path / "run", ["dataset=bfcl", f"dataset.path={bfcl_data}", "engine=replay",
                                            f"engine.predictions={preds}"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BFCL prompt texts: toolsweep's own wording" in done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    accuracy = dict(metrics.select("setting", "accuracy").rows())
    defective = {d.rsplit("_", 1)[0] for d in DEFECTS}
    assert {s: round(a * COUNTS[s]) for s, a in accuracy.items() if s in defective} == \
        {"parallel_multiple": 199, "live_simple": 256, "live_multiple": 1050}
    # the gold is inside the call grammar but for the same defects and live_relevance's stand-in gold
    samples = pl.read_parquet(tmp_path / "run" / "samples.parquet")
    outside = set(samples.filter(~pl.col("gold_in_schema"))["bfcl_id"].to_list())
    assert outside == DEFECTS | {f"live_relevance_{n}-{n}-0" for n in range(16)}
    assert_documented("bfcl", metrics)
    assert all(accuracy[s] == 1.0 for s in COUNTS if s not in defective)
    assert {"non_live_ast", "live_ast", "irrelevance_all", "all"} <= set(accuracy)
    summary = dict(metrics.select("setting", "bfcl_summary").rows())
    assert summary["non_live_ast"] == pytest.approx((1 + 1 + 1 + 199 / 200) / 4)
    assert summary["live_ast"] == pytest.approx((1351 - 5) / 1351) and summary["all"] is None
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["bfcl"] == {"texts": "own", "call_reader": None}


@pytest.mark.parametrize("overrides,message", [
    (["decoding.constraint=outlines"], "cannot apply the benchmark's answer grammar"),
    (["decoding.constraint=xgrammar", "engine=transformers"], "engine=transformers applies a constraint as a regex"),
    (["decoding.constraint=xgrammar", "engine=chat", "engine.base_url=http://127.0.0.1:1/v1"], "engine=chat cannot"),
    (["decoding.constraint=xgrammar", "prompt.format=native", "engine=chat", "engine.base_url=http://127.0.0.1:1/v1"],
     "engine=chat cannot"),
], ids=["outlines takes no grammar", "transformers applies regexes only", "a chat server takes no grammar",
        "a chat server cannot allow text or calls"])
def test_grammar_constraints_refused_where_they_cannot_apply(embedded_model, overrides, message):
    with pytest.raises(ConfigError, match=message):
        _validate(["dataset=bfcl", f"dataset.path={REPO}", *overrides])


@pytest.mark.parametrize("constraint", ["xgrammar", "guidance", "none"])
def test_grammar_constraints_pass_validation_where_they_apply(embedded_model, constraint, tmp_path):
    try:
        _validate(["dataset=bfcl", f"dataset.path={tmp_path}", f"decoding.constraint={constraint}"])
    except ConfigError as exc:
        assert "grammar" not in str(exc), exc


def test_requests_carry_the_grammar_in_the_benchmark_format_only():
    from inference.engines import Request
    from inference.solvers.single_call import PromptPlan, requests_for
    from inference.toolcalls import grammar_spec

    prompts = pl.DataFrame({"sample_id": ["a"], "prompt": ["p"], "prompt_token_ids": [[1]], "schema_json": ['{"s":1}'],
                            "failure": [None], "sample_index": [0], "grammar": ['start: "[" "]"']},
                           schema_overrides={"failure": pl.String, "prompt_token_ids": pl.List(pl.Int32)})
    constrained = requests_for(prompts, "xgrammar", PromptPlan("benchmark"))[0]
    assert constrained.grammar == 'start: "[" "]"' and constrained.schema_json is None
    assert requests_for(prompts, "none", PromptPlan("benchmark"))[0].grammar is None
    native = requests_for(prompts, "xgrammar", PromptPlan("native", "hermes", True, 8, True))[0]
    assert native.grammar is None and native.schema_json == '{"s":1}' and native.calls_optional
    assert grammar_spec(None, None, 1, False, None, constrained.grammar, "guidance") == {"grammar": constrained.grammar}
    with pytest.raises(ConfigError, match="outlines cannot apply a Lark grammar"):
        grammar_spec(None, None, 1, False, None, constrained.grammar, "outlines")
    from inference.cache import request_key

    plain = Request("a", "p", (1,), None)
    assert request_key(plain, {}) != request_key(Request("a", "p", (1,), None, grammar="g"), {})


def test_prior_turns_sit_between_the_system_and_the_user_turn():
    from inference.prompts import chat_messages

    row = {"system": "S", "native_system": None, "user": "U",
           "prior_turns": json.dumps([{"role": "user", "content": "u0"}, {"role": "assistant", "content": "a0"}])}
    assert [m["content"] for m in chat_messages(row, False)] == ["S", "u0", "a0", "U"]
    assert [m["content"] for m in chat_messages(row, True)] == ["u0", "a0", "U"]
    assert [m["content"] for m in chat_messages({**row, "prior_turns": None}, False)] == ["S", "U"]


def test_gold_in_python_syntax_reads_back():
    from grading.scorers.bfcl.decoding import decode_prompting

    calls = [{"name": "a.b", "arguments": {"x": "it's", "y": [1.5, None], "z": {"k": True}}}, {"name": "c", "arguments": {}}]
    assert decode_prompting(python_calls(calls)).calls == [{"a.b": calls[0]["arguments"]}, {"c": {}}]


def test_a_function_whose_parameters_are_all_optional_has_a_valid_grammar():
    """`ls(a=...)`: the call without arguments is one more alternative of the same rule."""
    import lark

    parser = lark.Lark(call_grammar([{"name": "ls", "parameters": {"properties": {"a": {"type": "boolean"}},
                                                                   "required": []}}], 2))
    for text in ("[ls()]", "[ls(a=True)]", "[ls(), ls(a=False)]"):
        parser.parse(text)
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse("[ls(b=1)]")


@pytest.mark.shared_data
def test_multi_turn_categories_run_and_score_through_the_cli_with_a_scripted_model(tmp_path, bfcl_data, bfcl_eval_copy):
    """engine=script over the first two cases of each multi-turn category: the ground truth, one step per
    turn, for case 1 (BFCL passes it), and for case 0 calls that would run code under BFCL's `eval()`,
    which create nothing here; metrics per category and BFCL's pooled multi-turn figure, the texts'
    and environments' origin in run.json."""
    from tests.bfcl_multi_turn_scripts import step

    planted = tmp_path / "planted"
    rows = []
    for category in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"):
        truth = [json.loads(line)["ground_truth"]
                 for line in (bfcl_data / "possible_answer" / f"BFCL_v4_{category}.json").open(encoding="utf-8")][:2]
        probes = [f"[inspect.os.system(command='touch {planted}')]", f"[cd(folder=open(file='{planted}', mode='w'))]"]
        rows += [{"sample_id": f"{category}-0", "turn": k, "text": text} for k, text in enumerate(probes)]
        texts = [text for turn in truth[1] for text in ([step(turn), ""] if turn else [""])]
        rows += [{"sample_id": f"{category}-1", "turn": k, "text": text} for k, text in enumerate(texts)]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = "[multi_turn_base,multi_turn_miss_func,multi_turn_miss_param,multi_turn_long_context]"
    done = run_toolsweep(tmp_path / "run", ["dataset=bfcl", f"dataset.path={bfcl_data}", f"dataset.settings={settings}",
                                            "dataset.limit=2", f"dataset.bfcl_eval={bfcl_eval_copy}", "engine=script",
                                            f"engine.script={script}"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert not planted.exists()
    assert "BFCL environments: BFCL's own classes, read from" in done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet")
    accuracy = dict(metrics.select("setting", "accuracy").rows())
    assert accuracy == {c: 0.5 for c in ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                         "multi_turn_long_context", "multi_turn", "all")}, accuracy
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["bfcl"]["texts"] == "upstream"
    samples = pl.read_parquet(tmp_path / "run" / "samples.parquet")
    probe = samples.filter(pl.col("sample_id") == "multi_turn_base-0").row(0, named=True)
    results = [r for turn in json.loads(probe["trace"]) for s in turn["steps"] for r in s.get("results", [])]
    assert results == ["Error during execution: name 'inspect' is not defined",
                       "Error during execution: name 'open' is not defined"], results
    assert (tmp_path / "run" / "cases.html").is_file()
