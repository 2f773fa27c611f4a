"""Every multi-turn case of BFCL, under 14 scripted models (tests/bfcl_multi_turn_scripts.py): toolsweep's
loop and grading give the verdict, the error type, the steps per turn and the execution results that BFCL's
own loop and evaluation gave on the same scripts (tests/grading/data/bfcl_multi_turn_reference.json,
written by scripts/bfcl_multi_turn_reference.py running bfcl-eval 2026.3.23). The loop runs here with a
scripted generate, the same step for step as engine=script (the k-th model call of a case reads its k-th
text); no model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from grading.scorers.bfcl import grade
from grading.scorers.bfcl.environments import load
from grading.scorers.bfcl.multi_turn import MULTI_TURN
from inference.benchmarks.bfcl import multi_turn as loop_module
from inference.benchmarks.bfcl.data import load_bfcl
from inference.benchmarks.bfcl.solver import with_texts
from inference.benchmarks.bfcl.texts import resolve
from inference.engines import Generation
from inference.generation import Rendered
from tests.bfcl_multi_turn_scripts import scripts

REFERENCE = json.loads((Path(__file__).parent / "data" / "bfcl_multi_turn_reference.json").read_text(encoding="utf-8"))
GROUND_TRUTH_DEFECTS = {f"{category}_{n}" for category in MULTI_TURN for n in (
    0, 24, 31, 32, 51, 52, 53, 55, 56, 57, 58, 59, 61, 62, 63, 67, 69, 71, 77, 80, 85, 103, 105, 144)}
"""Cases whose ground truth, written by a model, fails under BFCL's own code: each has a ground-truth call
with a positional argument, which BFCL's decoder drops from a model's call."""


def run_scripts(table: pl.DataFrame, texts, classes, bfcl_eval: str,
                variant_scripts: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, dict]]:
    """{case id: {variant: outcome}} for every case and variant, through the loop and the scorer."""
    loop = loop_module.Loop(False, texts, False, 64, 1 << 30)
    cases = loop_module.cases_of(table)
    runs = [(case, variant, script) for case in cases for variant, script in variant_scripts[case.case_id].items()]
    episodes = []
    for n, (case, variant, script) in enumerate(runs):
        case = loop_module.Case(**{**case.__dict__, "sample_id": f"{case.sample_id}/{n}"})
        episodes.append(loop_module.start(case, classes, loop))
    texts_by_id = {e.case.sample_id: script for e, (_, _, script) in zip(episodes, runs)}

    def generate(requests):
        out = []
        for request in requests:
            sample_id, _, k = request.sample_id.rpartition("@")
            script = texts_by_id[sample_id]
            out.append(Generation(request.sample_id, script[int(k)] if int(k) < len(script) else "", "stop", 1))
        return out

    loop_module.run(episodes, generate, lambda chat, tools: Rendered("", (), None), loop)
    rows = {r["sample_id"]: r for r in table.iter_rows(named=True)}
    found: dict[str, dict[str, dict]] = {}
    for episode, (case, variant, _) in zip(episodes, runs):
        row = {**rows[case.sample_id], "output": json.dumps(episode.outputs), "failure": None,
               "prompt_format": "benchmark", "bfcl_code": bfcl_eval}
        graded = grade("official", row)
        results = [m["content"] for m in episode.chat if m["role"] == "tool"]  # every result fed back, in order
        found.setdefault(case.case_id, {})[variant] = {
            "valid": graded["correct"], "error_type": graded["error_type"], "steps": [len(t) for t in episode.outputs],
            "tool": hashlib.sha256(json.dumps(results, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]}
    return found


@pytest.fixture(scope="module")
def outcomes(bfcl_data, bfcl_eval_copy) -> dict[str, dict[str, dict]]:
    texts = resolve("upstream", bfcl_eval_copy, str(bfcl_data))
    table = with_texts(load_bfcl(bfcl_data, MULTI_TURN), texts)
    truth = {}
    for category in MULTI_TURN:
        for line in (bfcl_data / "possible_answer" / f"BFCL_v4_{category}.json").open(encoding="utf-8"):
            record = json.loads(line)
            truth[record["id"]] = record["ground_truth"]
    questions = {}
    for category in MULTI_TURN:
        for line in (bfcl_data / f"BFCL_v4_{category}.json").open(encoding="utf-8"):
            record = json.loads(line)
            questions[record["id"]] = record
    variant_scripts = {case_id: scripts(questions[case_id], truth[case_id]) for case_id in truth}
    return run_scripts(table, texts, load(bfcl_eval_copy).classes, bfcl_eval_copy, variant_scripts)


def test_the_reference_covers_every_case_and_variant(outcomes):
    assert REFERENCE["bfcl_eval"] == "2026.3.23" and len(REFERENCE["verdicts"]) == 800
    assert {c: set(v) for c, v in outcomes.items()} == {c: set(v) for c, v in REFERENCE["verdicts"].items()}
    verdicts = [v["valid"] for case in REFERENCE["verdicts"].values() for v in case.values()]
    assert 1000 < sum(verdicts) < len(verdicts) - 1000  # both outcomes, plenty of each


@pytest.mark.parametrize("category", MULTI_TURN)
def test_every_scripted_run_equals_bfcls_own_verdict_steps_and_results(outcomes, category):
    differ = {}
    for case_id, variants in REFERENCE["verdicts"].items():
        if not case_id.startswith(category + "_") or not case_id[len(category) + 1:].isdigit():
            continue
        for variant, expected in variants.items():
            got = outcomes[case_id][variant]
            if got != expected:
                differ[f"{case_id}/{variant}"] = (got, expected)
    assert not differ, f"{len(differ)} runs differ from BFCL's, e.g. {list(differ.items())[:3]}"


def test_the_ground_truth_passes_wherever_bfcls_own_code_passes_it(outcomes):
    failing = {case_id for case_id, variants in outcomes.items() if not variants["gt_turn"]["valid"]}
    assert failing == GROUND_TRUTH_DEFECTS
