"""Metrics tables follow what the scorer declares: its subsets (`{setting}/{subset}` rows), its
count columns, and a judge-failure share only where cases were sent to the judge."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from grading.errors import GradingError
from grading.grades import grade
from grading.metrics import COUNT_COLUMNS, metrics_schema, summarize
from grading.report import format_table
from grading.scoring import get_scorer, scorer_names
from tests.grading.conftest import ETAPP, NOT_JUDGED, etapp_case, etapp_points, etapp_table, make_samples

POINTS = etapp_points([2, 1], [1, 2])
# Two settings; tg-2 and r-1 needed a data substitute (not clean); the judge failed on tg-1.
CASES = [
    etapp_case("tg-0", "tool_given/fc", (4, 3, 2), POINTS, (3, 4, 3, 1, 0), "finish", ["t1"], ["t1"]),
    etapp_case("tg-1", "tool_given/fc", None, None, (5, 2, 2, 0, 2), "turn_cap", ["t1"], [],
               error="judge answer is not JSON"),
    etapp_case("tg-2", "tool_given/fc", (2, 5, 4), POINTS, (2, 2, 1, 1, 1), "finish", ["t1", "t2"], ["t2"],
               clean=False),
    etapp_case("r-0", "retrieval/fc", (3, 3, 3), POINTS, (4, 2, 1, 1, 0), "finish", ["search_tools"], []),
    etapp_case("r-1", "retrieval/fc", (5, 4, 1), POINTS, (6, 3, 3, 0, 0), "finish", ["search_tools"], [],
               clean=False),
]
GRADED = grade(etapp_table(CASES))


def metrics_with_clean(graded: pl.DataFrame) -> pl.DataFrame:
    """What inference/benchmarks/etapp/run.py computed before the scorer declared the subset (its
    `metrics_with_clean`, copied), summarized with a scorer that declares none."""
    plain = dataclasses.replace(ETAPP, subsets={})
    whole = summarize(graded, plain)
    clean = graded.filter(pl.col("clean"))
    if clean.is_empty():
        return whole
    part = summarize(clean, plain).with_columns(pl.format("{}/clean", pl.col("setting")).alias("setting"))
    order = {s: i for i, s in enumerate(whole["setting"].to_list())}
    both = pl.concat([whole.with_columns(pl.lit(0).alias("_c")), part.with_columns(pl.lit(1).alias("_c"))])
    key = pl.col("setting").str.replace("/clean$", "").replace_strict(order, default=len(order))
    return both.sort(key, "_c", maintain_order=True).drop("_c")


def test_summarize_adds_each_settings_clean_rows_after_it():
    metrics = summarize(GRADED)
    assert metrics["setting"].to_list() == ["tool_given/fc", "tool_given/fc/clean", "retrieval/fc",
                                            "retrieval/fc/clean", "all", "all/clean"]
    clean = metrics.filter(setting="tool_given/fc/clean").row(0, named=True)
    assert (clean["n"], clean["procedure"], clean["judge_failed"]) == (2, 4.0, 0.5), "tg-0 and tg-1 only"
    assert metrics.filter(setting="all/clean")["n"].to_list() == [3]


# (id, cases, reason)
SAME_ROWS_CASES = [
    ("mixed", CASES, "clean and substituted cases in both settings"),
    ("none_clean", [{**c, "clean": False} for c in CASES], "no clean case: no /clean row at all"),
    ("one_setting_clean", [c for c in CASES if c["sample_id"] != "r-0"],
     "retrieval has no clean case left: it gets no /clean row, the pooled one still does"),
    ("all_clean", [{**c, "clean": True} for c in CASES], "every case clean: /clean rows equal their setting's"),
]


@pytest.mark.parametrize("cases", [c[1] for c in SAME_ROWS_CASES], ids=[c[0] for c in SAME_ROWS_CASES])
def test_summarize_gives_the_rows_inference_computed_by_hand(cases):
    graded = grade(etapp_table(cases))
    assert summarize(graded).equals(metrics_with_clean(graded))


def test_a_subset_column_that_is_missing_or_not_boolean_is_refused():
    with pytest.raises(GradingError, match="subset 'clean' over the sample column 'judge_clean', which the table "
                                           "lacks"):
        summarize(GRADED.drop("judge_clean"))
    with pytest.raises(GradingError, match="needs a Boolean column 'judge_clean', got String"):
        summarize(GRADED.with_columns(pl.col("judge_clean").cast(pl.String)))


# (id, scorer, whether its metrics table has gold_schema_coverage, reason)
COVERAGE_CASES = [
    ("petoolbench", "petoolbench", True, "single call under a tool schema with a gold tool"),
    ("toolspectrum", "toolspectrum_f1", True, "single call under a tool schema with a gold tool"),
    ("familytool", "unifiedtoolhub", True, "single call under a tool schema with gold calls"),
    ("etapp", "etapp_judge", False, "multi-turn, judged: no gold tool, no schema to cover it"),
]


@pytest.mark.parametrize("name,expected", [c[1:3] for c in COVERAGE_CASES], ids=[c[0] for c in COVERAGE_CASES])
def test_count_columns_are_those_that_apply(name, expected):
    schema = metrics_schema(get_scorer(name))
    assert ("gold_schema_coverage" in schema) is expected
    assert {"n_failed", "n_too_long"} <= set(schema), "every run can fail or run too long"


def test_etapp_metrics_have_no_coverage_column_anywhere():
    metrics = summarize(GRADED)
    assert "gold_schema_coverage" not in metrics.columns
    assert "gold_schema_coverage" not in format_table(metrics, ETAPP).splitlines()[0]
    petoolbench = summarize(make_samples({"p": ["call"]}))
    assert petoolbench["gold_schema_coverage"].to_list() == [1.0, 1.0, 1.0, 1.0], "PEToolBench keeps it"


def test_every_shipped_scorer_declares_known_counts_and_kept_subset_columns():
    from grading.report import sample_schema

    for name in scorer_names():
        scorer = get_scorer(name)
        assert set(metrics_schema(scorer)) >= set(scorer.count_columns) and \
            set(scorer.count_columns) <= set(COUNT_COLUMNS), name
        for column in scorer.subsets.values():
            assert sample_schema(scorer).get(column) == pl.Boolean, f"{name}: samples.parquet keeps {column}"


def test_an_unknown_count_column_names_the_known_ones():
    bad = dataclasses.replace(ETAPP, count_columns=("n_judged",))
    with pytest.raises(GradingError, match=r"declares count columns \['n_judged'\].*choose from"):
        metrics_schema(bad)


# (id, how the cases were judged, expected judge_failed pooled, reason)
NOT_JUDGED_CASES = [
    ("switched_off", lambda c: {**c, "judge_error": NOT_JUDGED, **_no_judge_output()}, None,
     "roles.judge.enabled=false: no case was sent to the judge, so none failed"),
    ("no_judge_row", lambda c: {**c, "judge_error": None, **_no_judge_output()}, None,
     "a case without any judge row (error and scores all null) was not judged"),
    ("half_switched_off", lambda c: {**c, "judge_error": NOT_JUDGED, **_no_judge_output()}
     if c["setting"] == "retrieval/fc" else c, 1 / 3,
     "only the three tool-given cases were sent: one failure in three, not in five"),
]


def _no_judge_output() -> dict:
    return {"judge_procedure": None, "judge_personalization": None, "judge_proactivity": None,
            "judge_keypoints": None}


@pytest.mark.parametrize("change,expected", [c[1:3] for c in NOT_JUDGED_CASES], ids=[c[0] for c in NOT_JUDGED_CASES])
def test_not_judged_is_no_judge_failure(change, expected):
    metrics = summarize(grade(etapp_table([change(c) for c in CASES])))
    assert metrics.filter(setting="all")["judge_failed"][0] == (pytest.approx(expected) if expected else None)


def test_an_unjudged_run_shows_no_judge_failure():
    graded = grade(etapp_table([{**c, "judge_error": NOT_JUDGED, **_no_judge_output()} for c in CASES]))
    assert graded["judge_judged"].null_count() == graded.height, "neither judged nor failed"
    header = format_table(summarize(graded), ETAPP).splitlines()[0]
    assert "judge_failed" not in header and "procedure" not in header
    assert "mean_turns" in header, "the process measures remain"
