"""Why a call missed: tool outcomes (preference vs function misses) and parameter outcomes, on
hand-made cases and on the real PEToolBench file."""

from __future__ import annotations

import json

import polars as pl
import pytest

from grading.diagnosis import param_outcome, tool_outcome
from grading.grades import grade
from inference.benchmarks.petoolbench import load_petoolbench
from inference.gold import gold_output
from tests.conftest import PETOOLBENCH
from tests.warm import toolsweep

pytestmark = pytest.mark.shared_data

SAME = ["<A>.<t1>.<api>", "<A>.<t2>.<api>"]
CANDIDATES = [*SAME, "<B>.<t3>.<other>"]


@pytest.mark.parametrize("tool,expected", [
    ("<A>.<t1>.<api>", "correct"), ("<A>.<t2>.<api>", "preference_miss"),
    ("<B>.<t3>.<other>", "function_miss"), ("<C>.<made>.<up>", "not_a_candidate")])
def test_tool_outcomes(tool, expected):
    assert tool_outcome(tool, SAME[0], SAME, CANDIDATES) == expected


def test_a_table_without_the_sets_says_nothing_but_correct():
    assert tool_outcome("<A>.<t2>.<api>", SAME[0], None, None) is None
    assert tool_outcome(SAME[0], SAME[0], None, None) == "correct"


@pytest.mark.parametrize("params,expected", [
    ({"city": "Paris", "n": 10}, ("correct", [])),
    ({"city": "Paris"}, ("missing_key", ["n"])),
    ({"city": "Paris", "n": 10, "lang": "fr"}, ("extra_key", ["lang"])),
    ({"city": "Paris", "n": "10"}, ("type_only", ["n"])),
    ({"city": "Lyon", "n": "10"}, ("wrong_value", ["city", "n"])),
    ({"city": "Paris", "n": 10.0}, ("correct", [])),   # 10 == 10.0, as the official comparison
    ("not an object", ("wrong_value", [])),
])
def test_parameter_outcomes(params, expected):
    assert param_outcome(params, {"city": "Paris", "n": 10}) == expected


@pytest.fixture(scope="module")
def real(petoolbench_file) -> pl.DataFrame:
    return load_petoolbench(petoolbench_file, ["p", "r", "c"])


def _graded(samples: pl.DataFrame, tools: list[str]) -> pl.DataFrame:
    outputs = [gold_output(tool, params, "benchmark", "hermes")
               for tool, params in zip(tools, samples["gold_params"])]
    return grade(samples.with_columns(pl.Series("output", outputs), pl.lit(None, dtype=pl.String).alias("failure")))


def test_every_real_gold_is_in_its_own_same_function_set_among_the_candidates(real):
    for gold, same, candidates in real.select("gold_tool", "same_func_tools", "candidate_tools").iter_rows():
        same = json.loads(same)
        assert gold in same and set(same) <= set(json.loads(candidates)) and 2 <= len(same) <= 6


def test_real_gold_replay_is_correct_everywhere(real):
    graded = _graded(real, real["gold_tool"].to_list())
    for reading in ("official", "json"):
        assert graded[f"{reading}_tool_outcome"].unique().to_list() == ["correct"]
        assert graded[f"{reading}_param_outcome"].unique().to_list() == ["correct"]


def test_another_same_function_tool_is_a_preference_miss_and_another_candidate_a_function_miss(real):
    same_sets = [json.loads(s) for s in real["same_func_tools"]]
    swapped = [next(t for t in same if t != gold) for same, gold in zip(same_sets, real["gold_tool"])]
    graded = _graded(real, swapped)
    assert graded["official_tool_outcome"].unique().to_list() == ["preference_miss"]
    others = [[t for t in json.loads(c) if t not in same] for c, same in zip(real["candidate_tools"], same_sets)]
    has_other = pl.Series([bool(o) for o in others])
    outside = real.filter(has_other)
    graded = _graded(outside, [o[0] for o in others if o])
    assert outside.height > 0.9 * real.height
    assert graded["official_tool_outcome"].unique().to_list() == ["function_miss"]
    assert graded["official_param_outcome"].null_count() == outside.height, "no parameter outcome for a wrong tool"


def test_toolsweep_grade_adds_the_diagnosis_to_a_run_made_before_it(tmp_path):
    """A run written before the loader added the same-function sets: re-grading reads them from
    the run's dataset, adds the outcomes, and generates nothing."""
    import subprocess
    import sys

    from inference.gold import gold_outputs, write_predictions
    from tests.conftest import REPO, SAMPLE

    gold = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p", "r", "c"])), tmp_path / "gold.jsonl")
    run = tmp_path / "run"
    done = toolsweep([f"hydra.run.dir={run}", "engine=replay", f"engine.predictions={gold}"], timeout=300)
    assert done.returncode == 0, done.stderr
    samples = pl.read_parquet(run / "samples.parquet")
    old = samples.drop("same_func_tools", "candidate_tools",
                       *[c for c in samples.columns if c.endswith(("_tool_outcome", "_param_outcome", "_param_keys"))])
    old.write_parquet(run / "samples.parquet")
    (run / "slices.parquet").unlink()
    regraded = subprocess.run([sys.executable, "-m", "inference.regrade", str(run)], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
    assert regraded.returncode == 0, regraded.stderr
    after = pl.read_parquet(run / "samples.parquet")
    assert after["official_tool_outcome"].unique().to_list() == ["correct"]
    assert after["same_func_tools"].null_count() == 0 and after.height == samples.height
    assert "loading model" not in regraded.stderr
    slices = pl.read_parquet(run / "slices.parquet")
    assert {"category", "history_length"} <= set(slices["slice"]), "the slices come back too"


def test_slices_of_the_real_file_cover_its_categories_history_bands_and_positions(real):
    from grading.slices import slice_table

    graded = _graded(real, real["gold_tool"].to_list()).with_columns(pl.lit(1500, dtype=pl.Int64).alias("prompt_tokens"))
    slices = slice_table(graded)
    pooled = slices.filter((pl.col("setting") == "all") & (pl.col("parser") == "official"))
    by = {name: pooled.filter(pl.col("slice") == name) for name in pooled["slice"].unique()}
    assert by["category"].height == 18
    assert by["history_length"]["band"].to_list() == ["<=20", "21-40", "41-70", ">70"]
    assert by["history_length"]["n"].sum() == real.height, "every record states its history length"
    records = json.loads(PETOOLBENCH.read_text(encoding="utf-8"))
    assert by["history_length"].filter(pl.col("band") == "<=20")["n"][0] == 3 * sum(
        r["history_length"] <= 20 for r in records)
    assert (pooled["small"] == (pooled["n"] < 20)).all() and pooled["small"].any(), "small slices are kept, marked"
    assert pooled["tool_acc"].min() == 1.0 and pooled["tool_acc_low"].is_not_null().all()


def test_a_run_writes_slices_beside_its_metrics(tmp_path):
    from inference.gold import gold_outputs, write_predictions
    from tests.conftest import SAMPLE

    gold = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p", "r", "c"])), tmp_path / "gold.jsonl")
    done = toolsweep([f"hydra.run.dir={tmp_path / 'run'}", "engine=replay", f"engine.predictions={gold}"], timeout=300)
    assert done.returncode == 0, done.stderr
    slices = pl.read_parquet(tmp_path / "run" / "slices.parquet")
    assert set(slices["slice"]) == {"category", "history_length", "num_tools_combined", "gold_position"}, \
        "replay has no prompt tokens: no prompt-token bands"
    assert "## Slices" in (tmp_path / "run" / "metrics.md").read_text()
