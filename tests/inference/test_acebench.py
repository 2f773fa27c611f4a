"""ACEBench normal_preference: the loader, the prompt texts, the answer grammar, the gold replay over
the real data (ACEBench's own checker gives its gold 49/50), and the real vLLM engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from inference.benchmarks import get_benchmark, load_dataset
from inference.benchmarks.acebench import texts
from inference.benchmarks.acebench.grammar import answer_regex, gold_answer
from inference.errors import DatasetError
from tests.conftest import REPO
from tests.gold_coverage import assert_documented
from tests.inference.test_end_to_end import run_toolsweep

FUNCTIONS = [
    {"name": "bookHotel", "description": "Book a room.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City."}, "guests": {"type": "integer", "description": "Guests."},
        "breakfast": {"type": "boolean", "description": "Breakfast."},
        "amenities": {"type": "array", "description": "Wanted amenities."}}, "required": ["city"]}},
    {"name": "searchHotels", "description": "Search.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City."}}, "required": ["city"]}},
]


def _write_case(folder: Path, question: dict, truth: dict) -> Path:
    data = folder / "data_all" / "data_en"
    (data / "possible_answer").mkdir(parents=True)
    (data / "data_normal_preference.json").write_text(json.dumps(question) + "\n")
    (data / "possible_answer" / "data_normal_preference.json").write_text(json.dumps(truth) + "\n")
    return folder


QUESTION = {"id": "normal_preference_0", "question": "user: Book me a hotel at home.\n", "function": FUNCTIONS,
            "profile": "{'basic_features': {'UserHomeLocation': 'Paris'}}"}
TRUTH = {"id": "normal_preference_0", "ground_truth": {"bookHotel": {"city": "Paris", "guests": 2}}}


def test_loader_builds_the_sample_and_the_scorer_inputs(tmp_path):
    table = load_dataset("acebench", _write_case(tmp_path, QUESTION, TRUTH), ["normal_preference"])
    row = table.row(0, named=True)
    assert (row["sample_id"], row["gold_tool"], json.loads(row["gold_params"])) == (
        "normal_preference-0", "bookHotel", {"city": "Paris", "guests": 2})
    assert json.loads(row["functions"]) == FUNCTIONS and json.loads(row["ground_truth"]) == TRUTH["ground_truth"]
    assert str(FUNCTIONS) in row["system"] and QUESTION["profile"] in row["system"], "as ACEBench fills its template"
    assert row["user"].endswith(QUESTION["question"])
    assert [s["function"]["name"] for s in json.loads(row["tool_specs"])] == ["bookHotel", "searchHotels"]
    assert QUESTION["profile"] in row["native_system"]


@pytest.mark.parametrize("question,truth,problem", [
    ({**QUESTION, "id": "normal_preference_x"}, TRUTH, "id must look like"),
    (QUESTION, {**TRUTH, "id": "normal_preference_1"}, "possible answer on the same line"),
    ({**QUESTION, "function": [{**FUNCTIONS[1], "parameters": {"type": "object", "properties": {
        "city": {"type": "geo"}}, "required": []}}]}, TRUTH, "not in ACEBench's type table"),
    (QUESTION, {**TRUTH, "ground_truth": {"cancelHotel": {"id": "1"}}}, "match no API"),
    (QUESTION, {**TRUTH, "ground_truth": []}, "ground_truth must be"),
], ids=["bad-id", "unpaired", "unknown-type", "gold-call-unknown", "empty-truth"])
def test_loader_refuses_what_acebench_would_mispair_or_crash_on(tmp_path, question, truth, problem):
    with pytest.raises(DatasetError, match=problem):
        load_dataset("acebench", _write_case(tmp_path, question, truth), ["normal_preference"])


# A prompt file of our own writing in ACEBench's layout: the texts are read, never imported.
PROMPT_FILE = '''import os
os.environ["IMPORTED"] = "1"
SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN = """SYS profile={profile} functions={function}"""
USER_PROMPT_EN = """USR {question}"""
OTHER = 3
'''


def _checkout(folder: Path, text: str) -> Path:
    (folder / "model_inference").mkdir(parents=True, exist_ok=True)
    (folder / texts.PROMPT_FILE).write_text(text)
    return folder


def test_upstream_texts_are_read_with_ast_and_filled_as_acebench_fills_them(tmp_path, monkeypatch):
    monkeypatch.delenv("IMPORTED", raising=False)
    chosen = texts.resolve("auto", _checkout(tmp_path, PROMPT_FILE))
    assert chosen.source == "upstream" and len(chosen.sha256) == 64
    assert chosen.render("P", FUNCTIONS[:1], "user: hi\n") == (f"SYS profile=P functions={FUNCTIONS[:1]}", "USR user: hi\n")
    assert "IMPORTED" not in __import__("os").environ, "the file was executed"
    assert chosen.facts()["texts"] == "upstream" and "sha256" in chosen.line()


def test_own_texts_where_the_file_is_absent_or_asked_for(tmp_path):
    assert texts.resolve("auto", tmp_path) is texts.OWN
    assert texts.resolve("own", _checkout(tmp_path, PROMPT_FILE)) is texts.OWN
    with pytest.raises(DatasetError, match="needs ACEBench's model_inference/prompt_en.py"):
        texts.resolve("upstream", tmp_path / "elsewhere")


@pytest.mark.parametrize("text,problem", [
    ('SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN = "x"\n', "lacks the string constants"),
    (PROMPT_FILE.replace("{question}", "{query}"), "placeholder ACEBench's inference does not fill"),
    ("SYSTEM_PROMPT = (", "cannot read"),
], ids=["missing-constant", "unknown-placeholder", "not-python"])
def test_a_damaged_prompt_file_is_named(tmp_path, text, problem):
    with pytest.raises(DatasetError, match=problem):
        texts.resolve("upstream", _checkout(tmp_path, text))


def test_answer_grammar_takes_the_gold_and_keeps_to_the_format():
    grammar = re.compile(answer_regex(FUNCTIONS))
    gold = gold_answer({"bookHotel": {"city": "Paris", "guests": 2, "breakfast": True, "amenities": ["wifi"]}})
    assert gold == "[bookHotel(city='Paris', guests=2, breakfast=True, amenities=['wifi'])]"
    assert grammar.fullmatch(gold) and grammar.fullmatch("[bookHotel(city=\"O'Hare\")]")
    assert grammar.fullmatch("[searchHotels(city='Rome')]")
    for bad in ["[bookHotel(guests=2)]", "[bookHotel(guests=2, city='Paris')]", "[bookHotel(city='P', guests='2')]",
                "[bookHotel(city='P'), searchHotels(city='P')]", "[cancel(city='P')]", "bookHotel(city='P')"]:
        assert not grammar.fullmatch(bad), bad


def test_gold_answer_writes_repeated_calls_and_the_first_alternative():
    assert gold_answer({"send_1": {"to": "A"}, "send_2": {"to": "B"}}) == "[send(to='A'), send(to='B')]"
    assert gold_answer([{"f": {"x": None}}, {"g": {}}]) == "[f(x=None)]"


def test_config_check_names_what_cannot_run(tmp_path):
    from inference.benchmarks.acebench import _check

    class Cfg:
        dataset = get_benchmark("acebench").options(name="acebench", path=str(tmp_path), prompts="upstream")
        prompt = type("P", (), {"format": None})()
        engine = type("E", (), {"sends_chat": True, "name": "chat"})()
        decoding = type("D", (), {"constraint": "outlines"})()

    problems = _check(Cfg())
    assert len(problems) == 2 and "dataset.prompts=upstream" in problems[0] and "regex" in problems[1]


@pytest.mark.shared_data
def test_gold_replay_scores_what_acebench_gives_its_gold(tmp_path, acebench_dir):
    """toolsweep gold writes the 50 gold calls as `[ApiName(...)]`; replayed through the CLI they
    score 49/50, as ACEBench's own checker scores them: normal_preference_40's `["None"]` for an
    array parameter without item type fails its object-list check. The grammar takes 49 of the 50
    gold answers (normal_preference_38's null is no value of a string parameter)."""
    gold = tmp_path / "gold.jsonl"
    made = subprocess.run([sys.executable, "-m", "inference.gold", str(acebench_dir), str(gold), "--dataset", "acebench"],
                          cwd=REPO, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert json.loads(gold.read_text().splitlines()[0])["output"].startswith("[resetPassword(email='john.doe@")
    done = run_toolsweep(tmp_path / "run", ["dataset=acebench", f"dataset.path={acebench_dir}", "engine=replay",
                                            f"engine.predictions={gold}"])
    assert done.returncode == 0, done.stderr
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet").filter(setting="all", parser="official")
    assert metrics.select("n", "accuracy", "format_valid", "gold_schema_coverage").row(0) == (50, 0.98, 1.0, 0.98)
    assert_documented("acebench", pl.read_parquet(tmp_path / "run" / "metrics.parquet"))
    samples = pl.read_parquet(tmp_path / "run" / "samples.parquet")
    wrong = samples.filter(~pl.col("official_correct")).select("sample_id", "official_error_type").rows()
    assert wrong == [("normal_preference-40", "value_error")]
    assert samples.filter(~pl.col("gold_in_schema"))["sample_id"].to_list() == ["normal_preference-38"]
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["acebench"]["texts"] == "own" and "own wording" in facts["report_facts"]["prompt texts"]
    assert "ACEBench prompt texts: toolsweep's own wording" in done.stderr


# One engine start, two decodings: the ACEBench solver twice over one generator (its engine loads
# on the first request), constrained then free, each on the shortest-prompt case not yet used.
_TWO_DECODINGS = r'''
import dataclasses, sys
from pathlib import Path
import polars as pl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import inference.cli  # registers the config schema and resolvers
from inference.generation import MODEL_ROLE, Generator, Role
from inference.run import load_samples, run_config
from inference.runinfo import Timer
from inference.solvers import SolveContext, get_solver

repo, data, out, model = sys.argv[1:5]
with initialize_config_dir(config_dir=f"{repo}/conf", version_base="1.3"):
    composed = compose(config_name="config", overrides=[
        "dataset=acebench", f"dataset.path={data}", "model=local", f"model.path={model}", "engine.cache=false", "engine.cpu_kvcache_gib=0.0625", "model.max_model_len=2048",
        "decoding.max_new_tokens=64", "decoding.constraint=xgrammar"])  # the engine's backend; the free pass sends no grammar
cfg, benchmark = run_config(OmegaConf.to_container(composed, resolve=True))
samples = load_samples(cfg, benchmark)
lengths = [len(s) + len(u) for s, u in samples.select("system", "user").iter_rows()]
shortest = sorted(range(len(lengths)), key=lengths.__getitem__)[:2]
timer, built = Timer(), {}
def generator(role):
    if role not in built:
        built[role] = Generator(Role.of(cfg, role), Path(out), timer)
    return built[role]
solver = get_solver(benchmark.solvers[0])
for index, constraint in zip(shortest, ("xgrammar", "none")):
    run = dataclasses.replace(cfg, decoding=dataclasses.replace(cfg.decoding, constraint=constraint))
    table = solver.solve(samples[index:index + 1], SolveContext(run, benchmark, Path(out), timer, generator))
    table.with_columns(constraint=pl.lit(constraint)).write_parquet(f"{out}/{constraint}.parquet")
print("engines built:", len(built))
'''


@pytest.mark.vllm
@pytest.mark.shared_data
def test_vllm_gives_valid_rows_constrained_and_free(tmp_path, acebench_dir, tiny_model, scratch_env):
    """The tiny seeded model on the real engine (what is checked is the grammar's hold and the
    rows, not the answers' quality), one start: the constrained answer is a call in
    ACEBench's format over the case's APIs (or cut at max_new_tokens), the free one whatever the
    model writes; both are graded rows, never a crash, an unreadable answer a wrong one."""
    from grading.scorers.acebench import grade

    done = subprocess.run([sys.executable, "-c", _TWO_DECODINGS, str(REPO), str(acebench_dir), str(tmp_path), str(tiny_model)],
                          cwd=REPO, env=scratch_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "engines built: 1" in done.stdout
    rows = pl.concat([pl.read_parquet(tmp_path / f"{c}.parquet") for c in ("xgrammar", "none")], how="diagonal_relaxed")
    assert rows.height == 2 and rows["output"].null_count() == 0, rows.rows()
    assert rows["failure"].drop_nulls().is_in(["length"]).all(), rows.select("failure", "error").rows()
    for row in rows.iter_rows(named=True):
        fields = grade("official", row)
        assert fields["valid"] or fields["error_type"] == "wrong_output_format", (row["output"], fields)
        if row["constraint"] == "xgrammar":
            functions = json.loads(row["functions"])
            assert any(row["output"].startswith(f"[{f['name']}(") for f in functions), row["output"]
            if row["finish_reason"] == "stop":
                assert re.fullmatch(answer_regex(functions), row["output"]) and fields["valid"], row["output"]
