"""Grades and metrics: the paper's definitions, failures as wrong, and the written report schemas."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from grading.canonical import canonical_json
from grading.grades import grade
from grading.metrics import metrics_schema, summarize
from grading.report import format_table, read_metadata, sample_schema, write_metrics, write_samples
from grading.scoring import get_scorer

PETOOLBENCH = get_scorer("petoolbench")
METRIC_COLUMNS = tuple(metrics_schema(PETOOLBENCH))
SAMPLE_SCHEMA = sample_schema(PETOOLBENCH)

GOLD_TOOL = "<Data>.<Weather>.<Forecast>"
GOLD_PARAMS = {"city": "Lyon", "days": "10"}


def _row(output, failure=None, setting="p", sample_id="p-1", gold_params=GOLD_PARAMS):
    return {"sample_id": sample_id, "setting": setting, "output": output, "failure": failure,
            "gold_tool": GOLD_TOOL, "gold_params": canonical_json(gold_params), "gold_in_schema": True}


def _call(tool=GOLD_TOOL, params=None):
    return json.dumps({"tool_name": tool, "parameters": GOLD_PARAMS if params is None else params})


# (id, row, expected (tool_ok, params_ok) under both parsers, reason)
GRADE_CASES = [
    ("exact", _row(_call()), (True, True), "tool and parameters equal"),
    ("key_order", _row(_call(params={"days": "10", "city": "Lyon"})), (True, True),
     "parameters compare as dicts"),
    ("string_vs_int", _row(_call(params={"city": "Lyon", "days": 10})), (True, False),
     '"10" != 10, as in the paper'),
    ("extra_param", _row(_call(params={**GOLD_PARAMS, "units": "c"})), (True, False),
     "an extra key makes the object unequal"),
    ("wrong_tool_right_params", _row(_call(tool="<Data>.<OtherWeather>.<Forecast>")), (False, True),
     "param_acc counts whether or not the tool is right"),
    ("case_sensitive_tool", _row(_call(tool=GOLD_TOOL.lower())), (False, True), "tool names are case-sensitive"),
    ("unparsable", _row("the weather in Lyon"), (False, False), "no call: wrong on both"),
    ("failed_generation", _row(_call(), failure="length"), (False, False),
     "a failed generation is wrong even if its text holds the call"),
    ("too_long", _row(None, failure="too_long"), (False, False), "too_long rows count as wrong"),
    ("empty_gold_params", _row(_call(params={}), gold_params={}), (True, True), "{} equals {}"),
]


@pytest.mark.parametrize("row,expected", [(c[1], c[2]) for c in GRADE_CASES], ids=[c[0] for c in GRADE_CASES])
def test_grade(row, expected):
    graded = grade(pl.DataFrame([row]))
    for parser in ("official", "json"):
        got = graded.select(f"{parser}_tool_ok", f"{parser}_params_ok").row(0)
        assert got == expected, parser
        assert graded[f"{parser}_call_ok"][0] == all(expected)


def test_regrading_replaces_grade_columns():
    once = grade(pl.DataFrame([_row(_call())]))
    twice = grade(once)
    assert twice.columns == once.columns
    assert twice.equals(once)


def test_grade_rejects_foreign_tables():
    with pytest.raises(ValueError, match="lacks columns"):
        grade(pl.DataFrame({"sample_id": ["x"]}))


def _graded_table():
    rows = [_row(_call(), sample_id="p-1"),
            _row(_call(params={"city": "Lyon", "days": 10}), sample_id="p-2"),
            _row("nothing", sample_id="p-3"),
            _row(_call(), setting="r", sample_id="r-1"),
            _row(None, failure="too_long", setting="r", sample_id="r-2")]
    return grade(pl.DataFrame(rows))


def test_summarize_per_setting_and_pooled():
    metrics = summarize(_graded_table())
    assert tuple(metrics.columns) == METRIC_COLUMNS
    assert metrics.select("setting", "parser").rows() == [
        ("p", "official"), ("p", "json"), ("r", "official"), ("r", "json"), ("all", "official"), ("all", "json")]
    p = metrics.filter(setting="p", parser="official").row(0, named=True)
    assert (p["n"], p["tool_acc"], p["param_acc"], p["call_acc"], p["format_valid"]) == (3, 2 / 3, 1 / 3, 1 / 3, 2 / 3)
    r = metrics.filter(setting="r", parser="json").row(0, named=True)
    assert (r["n"], r["tool_acc"], r["n_failed"], r["n_too_long"]) == (2, 0.5, 1, 1)
    pooled = metrics.filter(setting="all", parser="official").row(0, named=True)
    assert pooled["n"] == 5 and pooled["tool_acc"] == pytest.approx(3 / 5)


def test_reports_have_explicit_schemas_and_run_facts(tmp_path):
    graded = _graded_table().with_columns(
        pl.lit(None, dtype=pl.Int64).alias(c) for c in ("entry_id", "prompt_tokens", "output_tokens"))
    graded = graded.with_columns(pl.lit("stop").alias("finish_reason"), pl.lit(None, dtype=pl.String).alias("error"),
                                 pl.lit("abc").alias("schema_id"), pl.lit(0).alias("history_dropped"))
    facts = {"toolsweep_run": {"backend": "outlines"}}
    samples_path = write_samples(graded, tmp_path, facts)
    metrics_path = write_metrics(summarize(graded), PETOOLBENCH, tmp_path, facts)
    assert pq.read_schema(samples_path).names == list(SAMPLE_SCHEMA)
    assert pq.read_schema(metrics_path).names == list(METRIC_COLUMNS)
    assert read_metadata(metrics_path) == facts
    metrics = pl.read_parquet(metrics_path)
    for col in ("tool_acc", "param_acc", "call_acc", "format_valid", "gold_schema_coverage"):
        assert metrics[col].is_between(0, 1).all()
    assert "| all | official | 5 |" in format_table(metrics, PETOOLBENCH)
