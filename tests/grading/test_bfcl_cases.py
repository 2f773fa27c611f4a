"""cases.html for BFCL's multi-turn categories: each case's turns (query, steps, calls and results,
why the turn ended), the verdict with BFCL's error type and failed turn, the state difference of a
failed case and the ground truth's calls, every model text escaped.

The run is built as the solver builds it (BFCL's loop over real cases, a fake generate standing in
for the model), graded and written as a run writes it, then its report rendered."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import polars as pl
import pytest

from grading.case_view import CASES, MESSAGE_CHARS
from grading.grades import grade
from grading.html_report import write_run_report
from grading.scorers.bfcl.environments import load
from grading.scorers.bfcl.multi_turn import STATE_MISMATCH
from inference.benchmarks.bfcl import multi_turn as loop_module
from inference.benchmarks.bfcl.data import load_bfcl
from inference.benchmarks.bfcl.solver import with_texts
from inference.benchmarks.bfcl.texts import resolve
from inference.engines import Generation
from inference.generation import Rendered
from tests.grading.conftest import write_run

SETTING = "multi_turn_base"
PLANTED = "<script>alert('planted')</script>"
"""A step's text that must come out as text, never as markup."""


def ground_truth(bfcl_data: Path, count: int) -> list[list[list[str]]]:
    path = bfcl_data / "possible_answer" / f"BFCL_v4_{SETTING}.json"
    return [json.loads(line)["ground_truth"] for line in path.open(encoding="utf-8")][:count]


def steps(truth: list[list[str]], wrong: bool) -> list[str]:
    """The case's model outputs in call order: per turn its ground-truth calls in one step, then a
    step that ends the turn (turn 0's, text that does not decode); `wrong` changes the first call's
    first argument so the state differs from the ground truth's."""
    texts = []
    for number, calls in enumerate(truth):
        calls = list(calls)
        if wrong and number == 0:
            calls[0] = re.sub(r"='", "='changed_", calls[0], count=1)
        texts += [f"[{', '.join(calls)}]"] if calls else []
        texts.append(PLANTED + " no more calls" if number == 0 else "")
    return texts


@pytest.fixture(scope="module")
def run(bfcl_data, bfcl_eval_copy, tmp_path_factory) -> Path:
    """A graded run of two cases: the first wrong from its first turn, the second right (its ground
    truth's own calls; the first case's ground truth alone fails BFCL's check at turn 2)."""
    texts = resolve("upstream", bfcl_eval_copy, str(bfcl_data))
    samples = with_texts(load_bfcl(bfcl_data, (SETTING,), 2), texts)
    truths = ground_truth(bfcl_data, 2)
    scripts = dict(zip(samples["sample_id"], (steps(t, wrong=i == 0) for i, t in enumerate(truths))))

    def generate(requests):
        answers = []
        for request in requests:
            sample_id, _, call = request.sample_id.rpartition("@")
            script = scripts[sample_id]
            text = script[int(call)] if int(call) < len(script) else ""
            answers.append(Generation(request.sample_id, text, "stop", 1))
        return answers

    loop = loop_module.Loop(False, texts, False, 100, 1 << 30)
    episodes = [loop_module.start(case, load(bfcl_eval_copy).classes, loop) for case in loop_module.cases_of(samples)]
    loop_module.run(episodes, generate, lambda chat, tools: Rendered("x", (1,), None), loop)
    table = loop_module.episode_table(episodes).drop("sample_index")
    solved = samples.drop([c for c in table.columns if c != "sample_id" and c in samples.columns]).join(
        table, on="sample_id", how="left", maintain_order="left").with_columns(
        pl.lit(bfcl_eval_copy).alias("bfcl_code"), pl.col("end_reason").alias("finish_reason"),
        pl.lit("benchmark").alias("prompt_format"))
    run_dir = write_run(tmp_path_factory.mktemp("bfcl") / "run", grade(solved))
    write_run_report(run_dir)
    return run_dir


def sections(page: str) -> dict[str, str]:
    """Each case's section of cases.html (its markup) by sample id."""
    found = {}
    for body in re.findall(r'<section class="case" id="case-\d+">(.*?)</section>', page, re.DOTALL):
        sample_id = html.unescape(re.search(r"<h2>(.*?)</h2>", body).group(1))
        found[sample_id] = body
    return found


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def test_a_passed_and_a_failed_case_show_turns_steps_calls_results_and_the_verdict(run):
    samples = pl.read_parquet(run / "samples.parquet").to_dicts()
    wrong, right = samples
    assert right["official_correct"] and not wrong["official_correct"], "the script gives one right, one wrong case"
    assert wrong["official_error_type"] == STATE_MISMATCH and wrong["official_failed_turn"] == 0
    page = (run / CASES).read_text(encoding="utf-8")
    shown = sections(page)
    assert set(shown) == {right["sample_id"], wrong["sample_id"]}
    for row in (right, wrong):
        text = text_of(shown[row["sample_id"]])
        trace = json.loads(row["trace"])
        truth = json.loads(row["possible_answer"])
        assert len(trace) == len(truth) == text.count("ground truth calls"), "every turn with its ground truth"
        for number, turn in enumerate(trace):
            assert f"turn {number}" in text
            for message in turn["query"]:
                assert message["content"][:200] in text, "the turn's query"
            for step in turn["steps"]:
                assert step["text"][:200] in text
                for call, result in zip(step.get("calls", []), step.get("results", [])):
                    assert call in text and result[:200] in text, "each call with its result"
            for call in truth[number]:
                assert call in text, "the ground truth's calls"
        assert "does not decode" in text and "no call" in text, "why each turn ended"
        assert row["finish_reason"] in text, "how the case ended"
    right_text, wrong_text = text_of(shown[right["sample_id"]]), text_of(shown[wrong["sample_id"]])
    assert re.search(r"verdict\s+right", right_text) and "state difference" not in right_text.lower()
    assert re.search(r"verdict\s+wrong", wrong_text) and re.search(rf"error type\s+{STATE_MISMATCH}", wrong_text)
    assert re.search(r"failed at turn\s+0", wrong_text), "the turn the verdict failed at"
    difference = json.loads(wrong["official_state_difference"])
    assert "state difference" in wrong_text.lower()
    for class_name, attributes in difference.items():
        for attribute, values in attributes.items():
            assert f"{class_name}.{attribute}" in wrong_text
            assert values["model"][:200] in wrong_text and values["ground_truth"][:200] in wrong_text


def test_the_index_lists_each_case_with_its_verdict_and_the_report_links_the_page(run):
    page = (run / CASES).read_text(encoding="utf-8")
    index = text_of(re.search(r'<table id="cases">(.*?)</table>', page, re.DOTALL).group(1))
    samples = pl.read_parquet(run / "samples.parquet")
    assert STATE_MISMATCH in index and all(sample_id in index for sample_id in samples["sample_id"])
    report = (run / "report.html").read_text(encoding="utf-8")
    assert f'href="{CASES}"' in report and "judge" not in text_of(report.split("<h2>Cases</h2>")[1].split("<h2>")[0])


def test_a_step_text_is_escaped_never_markup(run):
    page = (run / CASES).read_text(encoding="utf-8")
    assert "<script" not in page
    assert "&lt;script&gt;alert(" in page and PLANTED in text_of(page), "shown as text"


def test_long_texts_are_cut(run, tmp_path):
    from grading.case_view import case_page
    from grading.scoring import get_scorer

    samples = pl.read_parquet(run / "samples.parquet")
    trace = json.loads(samples["trace"][0])
    trace[0]["steps"][0]["text"] = "x" * (MESSAGE_CHARS * 3)
    longer = samples.head(1).with_columns(pl.lit(json.dumps(trace)).alias("trace"))
    page = case_page(tmp_path, longer, get_scorer("bfcl").cases, {})
    step = page["cases"][0]["episode"]["turns"][0]["steps"][0]
    assert len(step["text"]) < MESSAGE_CHARS + 100 and "more characters" in step["text"]


def test_a_single_call_run_gets_no_case_page(tmp_path):
    from grading.case_view import case_page
    from grading.scoring import get_scorer

    samples = pl.DataFrame({"sample_id": ["simple_python_0"], "setting": ["simple_python"]})
    assert case_page(tmp_path, samples, get_scorer("bfcl").cases, {}) is None


def row(trace, end, **grades):
    """A multi-turn sample row of two user turns, as samples.parquet holds it."""
    return {"sample_id": "multi_turn_base-9", "setting": SETTING, "trace": json.dumps(trace), "finish_reason": end,
            "turns": json.dumps([[{"role": "user", "content": ask}] for ask in ("first ask", "second ask")]),
            "possible_answer": json.dumps([["ls(a=True)"], ["pwd()"]]), "held_out": "{}", "turns_run": len(trace),
            "model_calls": 1, **{f"official_{k}": v for k, v in grades.items()}}


@pytest.mark.parametrize("trace, end, grades, ended, ran", [
    ([{"query": [{"role": "user", "content": "first ask"}],
       "steps": [{"text": "[ls(a=True)]", "finish_reason": "stop", "calls": ["ls(a=True)"], "results": ["{}"],
                  "ends_turn": "force quit: more than 20 call steps in one turn"}]}],
     "force_quit", {"correct": False, "error_type": "multi_turn:force_terminated"},
     "force quit: more than 20 call steps in one turn", [True, False]),
    ([{"query": [{"role": "user", "content": "first ask"}], "steps": []}],
     "too_long", {"correct": False, "error_type": "multi_turn:force_terminated"}, "the case ended (too_long)",
     [True, False]),
], ids=["a force quit leaves the second turn unrun", "a prompt too long ends the case before any step"])
def test_a_case_that_ended_early_shows_why_and_the_turns_it_never_ran(trace, end, grades, ended, ran):
    from grading.scorers.bfcl.cases import episode

    read = episode(row(trace, end, **grades))
    assert [t.ran for t in read.turns] == ran and read.turns[0].ended == ended
    assert read.turns[1].opened == (("user", "second ask"),) and read.turns[1].expected == ("pwd()",)
    assert ("end reason", end) in read.facts and ("error type", grades["error_type"]) in read.facts
