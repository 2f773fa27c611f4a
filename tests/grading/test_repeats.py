"""Repeated samples in grading: the estimators against brute force, the spread, CIs over records."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from grading.compare import compare_runs
from grading.metrics import summarize
from grading.repeats import pass_at, pass_curve, pass_hat, samples_per_record
from grading.scoring import get_scorer, mean
from grading.stats import clustered_ci, metric_ci, metric_cis
from grading.repeats import record_matrix
from tests.grading.conftest import make_samples


@pytest.mark.parametrize("n,c", [(n, c) for n in range(1, 7) for c in range(n + 1)])
def test_estimators_equal_the_share_of_every_k_subset(n, c):
    """pass@k is the share of the k-subsets of a record's n samples holding a pass, pass^k the
    share holding only passes: enumerated here, not by formula."""
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        assert pass_at(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
        assert pass_hat(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def repeated(table: pl.DataFrame, passes_by_record: list[list[bool]]) -> pl.DataFrame:
    """k copies of each of the first records of `table`, sample i of record r answered right when
    passes_by_record[r][i] (a wrong answer: another tool, the same parameters)."""
    rows = []
    for record, passes in zip(table.iter_rows(named=True), passes_by_record):
        for index, passed in enumerate(passes):
            rows.append({**record, "sample_id": f"{record['sample_id']}#{index}", "record_id": record["sample_id"],
                         "sample_index": index, **({} if passed else {"output": WRONG})})
    return pl.DataFrame(rows, schema=table.schema)


WRONG = '{"tool_name": "<Travel>.<Buses>.<Search>", "parameters": {"from": "Lyon", "to": "Paris"}}'


def _graded(passes_by_record: list[list[bool]]) -> pl.DataFrame:
    from grading.grades import grade

    base = make_samples({"p": ["call"] * len(passes_by_record)})
    inputs = [c for c in base.columns if not c.startswith(("official_", "json_"))]
    return grade(repeated(base.select(inputs), passes_by_record))


def test_pass_metrics_and_spread_match_hand_worked_values():
    """Four records, five samples each, right 5, 3, 1 and 0 times."""
    passes = [[True] * 5, [True, True, True, False, False], [True, False, False, False, False], [False] * 5]
    graded = _graded(passes)
    assert samples_per_record(graded) == 5
    row = summarize(graded).filter((pl.col("setting") == "all") & (pl.col("parser") == "official")).row(0, named=True)
    assert row["samples"] == 5 and row["n"] == 20
    assert row["tool_acc"] == pytest.approx(9 / 20)
    # per sample index: 3/4, 2/4, 2/4, 1/4, 1/4; mean 0.45; squared deviations sum to 0.175
    assert row["tool_acc_sd"] == pytest.approx(math.sqrt(0.175 / 4))
    assert row["tool_acc_pass_at_k"] == pytest.approx(3 / 4)    # a record right at least once in 5
    assert row["tool_acc_pass_hat_k"] == pytest.approx(1 / 4)   # right all 5 times
    assert row["format_valid_sd"] == 0.0 and row["format_valid_pass_hat_k"] == 1.0
    curve = pass_curve([("all", graded)], get_scorer("petoolbench")).filter(
        (pl.col("parser") == "official") & (pl.col("metric") == "tool_acc")).sort("k")
    assert curve["k"].to_list() == [1, 2, 3, 4, 5] and curve["records"].to_list() == [4] * 5
    # k=2 over C(5,2)=10 pairs: record 2 misses in 1 pair (C(2,2)), record 3 in 6 (C(4,2))
    assert curve.row(1, named=True)["pass_at"] == pytest.approx((1 + 0.9 + 0.4 + 0) / 4)
    assert curve.row(1, named=True)["pass_hat"] == pytest.approx((1 + 3 / 10 + 0 + 0) / 4)
    assert curve.row(0, named=True)["pass_at"] == pytest.approx(9 / 20)  # pass@1 is the mean


def test_a_one_sample_table_has_no_spread_and_no_pass_columns():
    graded = make_samples({"p": ["call", "wrong", "tool"]})
    row = summarize(graded).filter((pl.col("setting") == "all") & (pl.col("parser") == "official")).row(0, named=True)
    assert row["samples"] == 1 and row["tool_acc"] == pytest.approx(2 / 3)
    assert row["tool_acc_sd"] is None and row["tool_acc_pass_at_k"] is None and row["tool_acc_pass_hat_k"] is None


def test_records_are_resampled_with_their_samples():
    """A table of each record repeated 5 times, identically: its CI is the records' CI, not the
    narrower one of 5 times as many independent rows."""
    rng = np.random.default_rng(3)
    values = rng.random(60) < 0.5
    repeated_values = np.repeat(values, 5).astype(np.float64)
    metric = mean("acc", "ok", higher_is_better=True)
    frame = pl.DataFrame({"sample_id": [f"r{i // 5}#{i % 5}" for i in range(300)],
                          "record_id": [f"r{i // 5}" for i in range(300)], "x_ok": repeated_values})
    matrix = record_matrix(frame)
    assert matrix.shape == (60, 5)
    clustered = clustered_ci(metric, [repeated_values], matrix)
    records = metric_ci(metric, [values.astype(np.float64)])
    rows = metric_ci(metric, [repeated_values])
    assert clustered == pytest.approx(records, abs=0.03)
    assert (clustered[1] - clustered[0]) > 1.8 * (rows[1] - rows[0])
    assert metric_cis([metric], frame, "x")["acc_low"] == clustered[0]


def test_a_repeated_run_is_compared_by_record():
    passes = [[True] * 3, [True, False, False], [False] * 3]
    a, b = _graded(passes), _graded([[True] * 3, [True, True, False], [False, False, True]])
    comparison, flips = compare_runs(a, b)
    row = comparison.filter((pl.col("setting") == "all") & (pl.col("parser") == "official")
                            & (pl.col("metric") == "tool_acc")).row(0, named=True)
    assert row["n"] == 3  # records, not 9 samples
    assert row["acc_a"] == pytest.approx(4 / 9) and row["acc_b"] == pytest.approx(6 / 9)
    assert (row["a_only"], row["b_only"]) == (0, 2)
    assert set(flips.filter(pl.col("metric") == "tool_acc")["sample_id"]) == {"p-1", "p-2"}
