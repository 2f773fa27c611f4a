"""Summarize graded samples into one metrics row per setting x reading (plus the pooled `all`).

The metric columns are the scorer's own (grading.scoring.Metric). Every mean is over every
sample of the setting where its source is defined, so a failed or unparsable sample counts
as wrong (the denominator is never shrunk by failures).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from grading.scoring import Scorer, scorer_of

POOLED = "all"
# Columns every metrics table has besides the scorer's metrics.
KEY_COLUMNS: dict[str, pl.DataType] = {"setting": pl.String, "parser": pl.String, "n": pl.Int64}
COUNT_COLUMNS: dict[str, pl.DataType] = {"gold_schema_coverage": pl.Float64, "n_failed": pl.Int64,
                                          "n_too_long": pl.Int64}


def metrics_schema(scorer: Scorer) -> dict[str, pl.DataType]:
    """Column names and types of metrics.parquet for one scorer, in order."""
    return {**KEY_COLUMNS, **{m.name: pl.Float64 for m in scorer.metrics}, **COUNT_COLUMNS}


def setting_order(graded: pl.DataFrame) -> list[str]:
    """The table's settings in first-seen order, then the pooled row."""
    return [*graded.get_column("setting").unique(maintain_order=True).to_list(), POOLED]


def subset(graded: pl.DataFrame, setting: str) -> pl.DataFrame:
    """The rows of one setting, or all rows for the pooled one."""
    return graded if setting == POOLED else graded.filter(pl.col("setting") == setting)


def summarize(graded: pl.DataFrame) -> pl.DataFrame:
    """Metrics per setting and pooled, for every reading, settings in table order."""
    scorer = scorer_of(graded)
    rows = [_row(scorer, subset(graded, s), s, r) for s in setting_order(graded) for r in scorer.readings]
    return pl.DataFrame(rows, schema=metrics_schema(scorer), orient="row")


def _row(scorer: Scorer, frame: pl.DataFrame, setting: str, reading: str) -> dict[str, Any]:
    failure = frame["failure"].cast(pl.String)
    coverage = frame["gold_in_schema"].cast(pl.Float64).mean() if "gold_in_schema" in frame.columns else None
    return {"setting": setting, "parser": reading, "n": frame.height,
            **{m.name: m.value(frame, reading) for m in scorer.metrics},
            "gold_schema_coverage": coverage, "n_failed": failure.is_not_null().sum(),
            "n_too_long": (failure == "too_long").sum()}
