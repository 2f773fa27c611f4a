"""Summarize graded samples into one metrics row per setting x reading (plus the pooled `all`).

The metric columns are the scorer's own (grading.scoring.Metric). Every mean is over every
sample of the setting where its source is defined, so a failed or unparsable sample counts
as wrong (the denominator is never shrunk by failures). With k samples per record
(`decoding.samples`) each metric is averaged over the k and gets its spread, pass@k and pass^k
(grading.repeats). A scorer's subsets (e.g. `clean`)
add a `{setting}/{subset}` row after each setting's rows, pooled ones too, so every table made
from `summarize` has them; a scorer's pools of settings (e.g. `both/<method>`) add a row each
before `all`; the count columns are those the scorer declares.
"""

from __future__ import annotations

from typing import Any, Callable

import polars as pl

from grading.errors import GradingError
from grading.repeats import repeat_columns, repeat_row
from grading.scoring import Scorer, counts_of, pools_of, scorer_of, subsets_of

POOLED = "all"
# Columns every metrics table has besides the scorer's metrics.
KEY_COLUMNS: dict[str, pl.DataType] = {"setting": pl.String, "parser": pl.String, "n": pl.Int64}
COUNT_COLUMNS: dict[str, pl.DataType] = {"gold_schema_coverage": pl.Float64, "n_failed": pl.Int64,
                                          "n_too_long": pl.Int64}
"""Every count column a scorer may declare (`count_columns`), with its type."""


def _coverage(frame: pl.DataFrame) -> float | None:
    return frame["gold_in_schema"].cast(pl.Float64).mean() if "gold_in_schema" in frame.columns else None


_COUNTERS: dict[str, Callable[[pl.DataFrame], Any]] = {
    "gold_schema_coverage": _coverage,
    "n_failed": lambda frame: frame["failure"].is_not_null().sum(),
    "n_too_long": lambda frame: (frame["failure"].cast(pl.String) == "too_long").sum(),
}


def count_columns(scorer: Scorer) -> dict[str, pl.DataType]:
    """The count columns the scorer's metrics table has, with their types, in its order."""
    names = counts_of(scorer)
    unknown = [n for n in names if n not in COUNT_COLUMNS]
    if unknown:
        raise GradingError(f"scorer {scorer.name!r} declares count columns {unknown} that grading does not "
                           f"compute; choose from {list(COUNT_COLUMNS)}")
    return {n: COUNT_COLUMNS[n] for n in names}


def metrics_schema(scorer: Scorer) -> dict[str, pl.DataType]:
    """Column names and types of metrics.parquet for one scorer, in order: keys, metrics, counts,
    then the repeats' columns (samples per record, each metric's sd, pass@k and pass^k)."""
    return {**KEY_COLUMNS, **{m.name: pl.Float64 for m in scorer.metrics}, **count_columns(scorer),
            **repeat_columns(scorer)}


def setting_order(graded: pl.DataFrame) -> list[str]:
    """The table's settings in first-seen order, then the pooled row."""
    return [*graded.get_column("setting").unique(maintain_order=True).to_list(), POOLED]


def subset(graded: pl.DataFrame, setting: str) -> pl.DataFrame:
    """The rows of one setting, or all rows for the pooled one."""
    return graded if setting == POOLED else graded.filter(pl.col("setting") == setting)


def report_groups(graded: pl.DataFrame, scorer: Scorer) -> list[tuple[str, pl.DataFrame]]:
    """(label, rows) of every metrics row group, in report order: each setting, then its subsets
    as `{setting}/{subset}`; then the scorer's pools of settings (`pools`), each with its subsets;
    the pooled `all` last, then its subsets. A subset with no rows in a setting gives no group there."""
    columns = _subset_columns(graded, scorer)
    settings = setting_order(graded)[:-1]
    groups = []
    for setting, frame in [*((s, subset(graded, s)) for s in settings), *_pooled(graded, settings, scorer),
                           (POOLED, graded)]:
        groups.append((setting, frame))
        for name, column in columns.items():
            part = frame.filter(pl.col(column))
            if part.height:
                groups.append((f"{setting}/{name}", part))
    return groups


def _pooled(graded: pl.DataFrame, settings: list[str], scorer: Scorer) -> list[tuple[str, pl.DataFrame]]:
    """The scorer's rows over several settings, each where it gathers two or more, in first-seen order."""
    pool = pools_of(scorer)
    members: dict[str, list[str]] = {}
    for setting in settings if pool else []:
        label = pool(setting)
        if label is not None:
            members.setdefault(label, []).append(setting)
    return [(label, graded.filter(pl.col("setting").is_in(group))) for label, group in members.items()
            if len(group) > 1]


def _subset_columns(graded: pl.DataFrame, scorer: Scorer) -> dict[str, str]:
    columns = dict(subsets_of(scorer))
    for name, column in columns.items():
        if column not in graded.columns:
            raise GradingError(f"scorer {scorer.name!r} reports subset {name!r} over the sample column {column!r}, "
                               f"which the table lacks (it has {graded.columns}); rewrite the run with toolsweep")
        if graded.schema[column] != pl.Boolean:
            raise GradingError(f"subset {name!r} of scorer {scorer.name!r} needs a Boolean column {column!r}, got "
                               f"{graded.schema[column]}; type it in the scorer's input_types (its fields, for a "
                               "grade column)")
    return columns


def summarize(graded: pl.DataFrame, scorer: Scorer | None = None) -> pl.DataFrame:
    """Metrics per setting and pooled, each followed by its subsets, for every reading, settings in
    table order. `scorer`: the table's own (its `scorer` column) unless given."""
    scorer = scorer or scorer_of(graded)
    rows = [_row(scorer, frame, label, r) for label, frame in report_groups(graded, scorer) for r in scorer.readings]
    return pl.DataFrame(rows, schema=metrics_schema(scorer), orient="row")


def _row(scorer: Scorer, frame: pl.DataFrame, setting: str, reading: str) -> dict[str, Any]:
    # n counts rows: with k samples per record, k per record (each sample is a row).
    return {"setting": setting, "parser": reading, "n": frame.height, **repeat_row(scorer, frame, reading),
            **{name: _COUNTERS[name](frame) for name in count_columns(scorer)}}
