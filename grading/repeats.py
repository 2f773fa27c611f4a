"""Repeated samples (`decoding.samples=k`): how a metric varies between a record's k generations.

A run of k samples per record has k rows per record (`record_id`, `sample_index` 0..k-1). On
such a table:

- every metric's value is its mean over the k sample indices (the metric computed on the
  records' i-th samples, then averaged), and `{metric}_sd` the standard deviation of those k
  values (ddof 1): how far one run of the benchmark may land from another;
- every Boolean per-sample grade with a better direction (a `tool_ok`, a judge's
  score-at-threshold passes) gets pass@k and pass^k by the unbiased estimators over each
  record's n defined samples with c passed: pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al.,
  2021: at least one of k draws without replacement passes), pass^k = C(c, k) / C(n, k)
  (Yao et al., tau-bench: all k pass), averaged over the records with n >= k;
- CIs resample records, each with all its samples (grading.stats).

A table without `record_id` (a run before repeated samples, or k = 1) is one sample per record.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from grading.scoring import Metric, Scorer, grade_columns, source_arrays, subsets_of

PASS_AT, PASS_HAT = "pass_at_k", "pass_hat_k"
"""Suffixes of a pass metric's columns: `{metric}_pass_at_k`, `{metric}_pass_hat_k` (k = samples)."""
CURVE_SCHEMA: dict[str, pl.DataType] = {
    "setting": pl.String, "parser": pl.String, "metric": pl.String, "k": pl.Int64, "records": pl.Int64,
    "pass_at": pl.Float64, "pass_hat": pl.Float64,
}
"""passk.parquet: pass@k and pass^k of each pass metric for every k from 1 to the run's samples."""


def record_ids(frame: pl.DataFrame) -> pl.Series:
    """The record of every row (the sample id itself in a table without `record_id`)."""
    return frame["record_id"] if "record_id" in frame.columns else frame["sample_id"]


def samples_per_record(frame: pl.DataFrame) -> int:
    """k: the most rows any record has (1 for an empty table)."""
    if frame.height == 0 or "record_id" not in frame.columns:
        return 1
    return int(frame.group_by("record_id").len()["len"].max())


def record_matrix(frame: pl.DataFrame) -> np.ndarray | None:
    """Row indices by record (records x k, padded with `frame.height`, a row of nulls), or None
    where every record has one row (resample rows as they are)."""
    if samples_per_record(frame) == 1:
        return None
    rows = frame.select(pl.col("record_id"), pl.int_range(pl.len()).alias("row")).group_by(
        "record_id", maintain_order=True).agg("row")["row"].to_list()
    matrix = np.full((len(rows), max(map(len, rows))), frame.height, dtype=np.int64)
    for number, members in enumerate(rows):
        matrix[number, :len(members)] = members
    return matrix


def pass_metrics(scorer: Scorer) -> list[Metric]:
    """The metrics that get pass@k and pass^k: means of one Boolean grade with a better direction."""
    types = grade_columns(scorer)
    reading = scorer.readings[0]
    return [m for m in scorer.metrics if m.per_sample and m.higher_is_better is not None
            and types.get(f"{reading}_{m.sources[0]}") == pl.Boolean]


def repeat_columns(scorer: Scorer) -> dict[str, pl.DataType]:
    """The metrics table's columns about repeats: `samples`, each metric's `_sd`, pass@k and pass^k."""
    return {"samples": pl.Int64, **{f"{m.name}_sd": pl.Float64 for m in scorer.metrics},
            **{f"{m.name}_{suffix}": pl.Float64 for m in pass_metrics(scorer) for suffix in (PASS_AT, PASS_HAT)}}


def pass_at(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one record with n samples, c of them passed (n >= k)."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one record with n samples, c of them passed (n >= k)."""
    return math.comb(c, k) / math.comb(n, k)


def record_counts(frame: pl.DataFrame, column: str) -> list[tuple[int, int]]:
    """(n defined, c true) of `column` per record."""
    counted = frame.select(record_ids(frame).alias("_record"), pl.col(column).cast(pl.Boolean).alias("_pass"))
    grouped = counted.group_by("_record", maintain_order=True).agg(
        pl.col("_pass").is_not_null().sum().alias("n"), pl.col("_pass").fill_null(False).sum().alias("c"))
    return [(int(n), int(c)) for n, c in grouped.select("n", "c").iter_rows()]


def pass_values(frame: pl.DataFrame, column: str, k: int) -> tuple[float | None, float | None, int]:
    """(pass@k, pass^k, records) over the records with at least k defined samples of `column`."""
    kept = [(n, c) for n, c in record_counts(frame, column) if n >= k]
    if not kept:
        return None, None, 0
    return (float(np.mean([pass_at(n, c, k) for n, c in kept])),
            float(np.mean([pass_hat(n, c, k) for n, c in kept])), len(kept))


def metric_over_samples(metric: Metric, frame: pl.DataFrame, reading: str, k: int) -> tuple[float | None, float | None]:
    """(value, between-sample sd): the metric on each sample index's rows, averaged; sd None for k = 1."""
    if k == 1 or "sample_index" not in frame.columns:
        return metric.value(frame, reading), None
    values = [metric.reduce(*source_arrays(part, reading, metric.sources))
              for _, part in frame.group_by("sample_index", maintain_order=True)]
    defined = [v for v in values if v is not None and not math.isnan(v)]
    if not defined:
        return None, None
    return float(np.mean(defined)), float(np.std(defined, ddof=1)) if len(defined) > 1 else None


def repeat_row(scorer: Scorer, frame: pl.DataFrame, reading: str) -> dict[str, Any]:
    """Each metric's value and sd, pass@k and pass^k (k = samples per record > 1) of one metrics row."""
    k = samples_per_record(frame)
    row: dict[str, Any] = {"samples": k}
    for metric in scorer.metrics:
        row[metric.name], row[f"{metric.name}_sd"] = metric_over_samples(metric, frame, reading, k)
    for metric in pass_metrics(scorer):
        # With one sample pass@1 = pass^1 = the metric itself: left null rather than repeated.
        at, hat, _ = pass_values(frame, f"{reading}_{metric.sources[0]}", k) if k > 1 else (None, None, 0)
        row[f"{metric.name}_{PASS_AT}"], row[f"{metric.name}_{PASS_HAT}"] = at, hat
    return row


def pass_curve(groups: list[tuple[str, pl.DataFrame]], scorer: Scorer) -> pl.DataFrame:
    """pass@k and pass^k for k = 1..samples of every pass metric, per metrics row group and reading."""
    rows = []
    for label, frame in groups:
        top = samples_per_record(frame)
        for reading in scorer.readings:
            for metric in pass_metrics(scorer):
                column = f"{reading}_{metric.sources[0]}"
                rows += [(label, reading, metric.name, k, *_ordered(pass_values(frame, column, k)))
                         for k in range(1, top + 1)]
    return pl.DataFrame(rows, schema=CURVE_SCHEMA, orient="row")


def _ordered(values: tuple[float | None, float | None, int]) -> tuple[int, float | None, float | None]:
    at, hat, records = values
    return records, at, hat


def record_level(frame: pl.DataFrame, scorer: Scorer) -> pl.DataFrame:
    """One row per record for a paired comparison: with k samples per record, each grade the
    mean over the record's samples (a 0/1 grade becomes its pass share, so a record counts for
    the run that passed it more often); a subset's column stays Boolean, true where every sample
    of the record is in the subset; a one-sample table as it is."""
    marks = [c for c in subsets_of(scorer).values() if c in frame.columns]
    numeric = [c for c in grade_columns(scorer) if c in frame.columns and c not in marks
               and (frame.schema[c].is_numeric() or frame.schema[c] == pl.Boolean)]
    table = by_record(frame, numeric)
    if table is frame or not marks:
        return table
    every = frame.group_by(record_ids(frame).alias("sample_id"), maintain_order=True).agg(pl.col(marks).all())
    return table.drop(marks).join(every, on="sample_id", how="left", maintain_order="left")


def by_record(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """One row per record (`sample_id` the record's id): `columns` averaged over its samples (a
    Boolean grade becomes the share of samples that passed), the other columns its first sample's."""
    if samples_per_record(frame) == 1:
        return frame
    keyed = frame.with_columns(record_ids(frame).alias("sample_id"))
    means = [pl.col(c).cast(pl.Float64).mean().alias(c) for c in columns]
    rest = [pl.col(c).first() for c in keyed.columns if c not in columns and c != "sample_id"]
    return keyed.group_by("sample_id", maintain_order=True).agg(*rest, *means)
