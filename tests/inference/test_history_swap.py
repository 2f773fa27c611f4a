"""dataset.history=swap on the real PEToolBench file: the counterfactual history exchanges the gold
provider's name with a same-function alternative's, the gold follows, and an answer that keeps the
old gold is `prior_choice`."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from grading.grades import grade
from inference.benchmarks.petoolbench import load_petoolbench
from inference.gold import gold_output
from inference.benchmarks.petoolbench.history import HISTORY_START, exchange_providers, history_span, provider, swap_table
from tests.conftest import FAMILYTOOL_SAMPLE, REPO
from tests.warm import toolsweep

pytestmark = pytest.mark.shared_data
PLACEHOLDER = "\x00provider\x00"


@pytest.fixture(scope="module")
def real(petoolbench_file) -> pl.DataFrame:
    return load_petoolbench(petoolbench_file, ["p", "r", "c"])


@pytest.fixture(scope="module")
def swapped(real) -> pl.DataFrame:
    return swap_table(real, 0)


def _history(system: str) -> str:
    start, end = history_span(system)
    return system[start:end]


def _masked(text: str, names: list[str]) -> str:
    for name in names:
        text = text.replace(json.dumps(name, ensure_ascii=False)[1:-1], PLACEHOLDER)
    return text


def test_a_sample_whose_history_names_neither_provider_is_left_out(real, swapped):
    """About half the `p` histories never name the gold's provider or an alternative's: no name
    carries the preference there, so there is no counterfactual to make."""
    kept = set(swapped["sample_id"])
    counts = {s: (real.filter(setting=s).height, swapped.filter(setting=s).height) for s in ("p", "r", "c")}
    assert counts == {"p": (1000, 489), "r": (1000, 1000), "c": (1000, 1000)}
    for row in real.filter(~pl.col("sample_id").is_in(list(kept))).iter_rows(named=True):
        history = _history(row["system"])
        assert all(json.dumps(provider(t), ensure_ascii=False)[1:-1] not in history
                   for t in json.loads(row["same_func_tools"]))


def test_only_the_two_providers_names_change_and_the_gold_follows(real, swapped):
    real = real.filter(pl.col("sample_id").is_in(swapped["sample_id"].to_list()))
    assert real.height == swapped.height == 2489
    for before, after in zip(real.iter_rows(named=True), swapped.iter_rows(named=True)):
        gold, alternative = before["gold_tool"], after["gold_tool"]
        names = [provider(gold), provider(alternative)]
        assert alternative != gold and alternative in json.loads(before["same_func_tools"])
        assert alternative in json.loads(before["candidate_tools"]), "the new gold is offered"
        assert (after["prior_gold_tool"], after["gold_params"]) == (gold, before["gold_params"])
        for column in ("system", "native_system"):
            assert _masked(after[column], names) == _masked(before[column], names), "nothing else moved"
            assert exchange_providers(after[column], *names) == before[column], "an exchange undoes itself"
        old, new = _history(before["system"]), _history(after["system"])
        escaped = [json.dumps(n, ensure_ascii=False)[1:-1] for n in names]
        assert (new.count(escaped[1]), new.count(escaped[0])) == (old.count(escaped[0]), old.count(escaped[1]))
        assert old.count(escaped[0]) + old.count(escaped[1]) > 0 and new != old, "the history now points elsewhere"


def test_the_tools_offered_and_the_query_are_untouched(real, swapped):
    real = real.filter(pl.col("sample_id").is_in(swapped["sample_id"].to_list()))
    for column in ("user", "tools", "tool_specs", "same_func_tools", "candidate_tools", "sample_id"):
        assert swapped[column].equals(real[column]), column
    head = [s[:s.index(HISTORY_START)] for s in real["system"]]
    assert [s[:s.index(HISTORY_START)] for s in swapped["system"]] == head


def test_the_choice_is_seeded_per_record(real, swapped):
    assert swap_table(real, 0)["gold_tool"].equals(swapped["gold_tool"])
    several = real.filter(pl.col("same_func_tools").str.count_matches(r"\.<") > 6)  # 3 or more tools
    assert several.height > 0
    assert not swap_table(several, 1)["gold_tool"].equals(swap_table(several, 0)["gold_tool"])


def _graded(samples: pl.DataFrame, tools: list[str]) -> pl.DataFrame:
    outputs = [gold_output(tool, params, "benchmark") for tool, params in zip(tools, samples["gold_params"])]
    return grade(samples.with_columns(pl.Series("output", outputs), pl.lit(None, dtype=pl.String).alias("failure")))


def test_the_unswapped_gold_scores_zero_and_every_answer_is_a_prior_choice(swapped):
    graded = _graded(swapped, swapped["prior_gold_tool"].to_list())
    assert graded["official_tool_ok"].sum() == 0
    assert graded["official_tool_outcome"].unique().to_list() == ["prior_choice"]
    assert _graded(swapped, swapped["gold_tool"].to_list())["official_call_ok"].all()


def test_the_swapped_gold_replayed_through_the_cli_scores_one(tmp_path, petoolbench_file):
    preds = tmp_path / "gold-swap.jsonl"
    made = subprocess.run([sys.executable, "-m", "inference.gold", str(petoolbench_file), str(preds),
                           "--history", "swap"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    done = toolsweep([f"hydra.run.dir={tmp_path / 'run'}", "dataset=petoolbench", f"dataset.path={petoolbench_file}",
                      "dataset.history=swap", "engine=replay", f"engine.predictions={preds}"], timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = pl.read_parquet(tmp_path / "run" / "metrics.parquet").filter(setting="all")
    assert metrics["n"].to_list() == [2489, 2489] and metrics["call_acc"].min() == 1.0
    assert "dataset.history=swap: 511 of 3000 samples left out" in done.stderr
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["config"]["dataset"]["history"] == "swap"
    bad = subprocess.run([sys.executable, "-m", "inference.gold", str(FAMILYTOOL_SAMPLE), str(tmp_path / "x.jsonl"),
                          "--dataset", "familytool", "--history", "swap"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "history" in bad.stderr, bad.stderr[-2000:]


def test_compare_of_a_full_and_a_swap_run_counts_the_answers_that_moved(real, swapped):
    """toolsweep compare pairs the two runs on the samples both hold: a model that follows the
    history moves every answer; one that keeps its provider moves none (every answer stays)."""
    from grading.compare import compare_runs, counterfactual_moves

    full = _graded(real, real["gold_tool"].to_list())
    follows = _graded(swapped, swapped["gold_tool"].to_list())
    keeps = _graded(swapped, swapped["prior_gold_tool"].to_list())
    moved = counterfactual_moves(full, follows, ("official",)).filter(setting="all").row(0, named=True)
    assert (moved["n"], moved["a_right"], moved["moved"], moved["stayed"], moved["moved_share"]) == (2489, 2489, 2489, 0, 1.0)
    stayed = counterfactual_moves(full, keeps, ("official",)).filter(setting="p").row(0, named=True)
    assert (stayed["n"], stayed["moved"], stayed["stayed"]) == (489, 0, 489)
    comparison, _ = compare_runs(full, keeps)
    cell = comparison.filter(setting="all", parser="official", metric="tool_acc").row(0, named=True)
    assert (cell["n"], cell["acc_a"], cell["acc_b"]) == (2489, 1.0, 0.0)
    assert counterfactual_moves(full, full, ("official",)).height == 0, "no swap run, no table"
