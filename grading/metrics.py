"""Summarize graded samples into one metrics row per setting x parser (plus the pooled `all`)."""

from __future__ import annotations

import polars as pl

from grading.parsers import PARSERS
from grading.rules import ARG_GROUPS

POOLED = "all"

# Metric columns in report order; each is a mean over every sample of the setting, so a
# failed or unparsable sample counts as wrong (the denominator is never shrunk). The first
# four apply to every benchmark; app_acc and the argument-group accuracies only where the
# benchmark declares apps or argument groups (null elsewhere), and they average over the
# samples that have them (an argument group over the samples whose gold call has one).
METRICS = ("tool_acc", "param_acc", "call_acc", "format_valid", "app_acc",
           *(f"{g}_arg_acc" for g in ARG_GROUPS))
CORE_METRICS = METRICS[:4]

# The per-sample grade behind each metric: `metric` under `parser` is the mean of
# `{parser}_{METRIC_SOURCES[metric]}`. Comparisons and CIs resample these columns.
METRIC_SOURCES = {"tool_acc": "tool_ok", "param_acc": "param_score", "call_acc": "call_ok",
                  "format_valid": "valid", "app_acc": "app_ok",
                  **{f"{g}_arg_acc": f"{g}_arg" for g in ARG_GROUPS}}
# Refusal metrics are ratios over the samples the model refused (precision) or should have
# refused (recall), so they have no per-sample source; null when the ratio is 0/0.
REFUSAL_METRICS = ("refusal_precision", "refusal_recall")


def metric_column(parser: str, metric: str) -> str:
    """The samples.parquet column whose mean is `metric` under `parser`, e.g. official_tool_ok."""
    if metric not in METRIC_SOURCES:
        raise ValueError(f"unknown metric {metric!r}; choose one of {list(METRIC_SOURCES)}")
    return f"{parser}_{METRIC_SOURCES[metric]}"


def summarize(graded: pl.DataFrame) -> pl.DataFrame:
    """Metrics per setting and pooled, for every parser, in a fixed row order."""
    frames = [_summarize_parser(graded, p) for p in PARSERS]
    settings = _setting_order(graded)
    out = pl.concat(frames)
    order = {s: i for i, s in enumerate(settings)}
    return (out.with_columns(pl.col("setting").replace_strict(order, return_dtype=pl.Int32).alias("_o"))
            .sort(["_o", "parser"], descending=[False, True]).drop("_o"))


def _setting_order(graded: pl.DataFrame) -> list[str]:
    return [*graded.get_column("setting").unique(maintain_order=True).to_list(), POOLED]


def _summarize_parser(graded: pl.DataFrame, parser: str) -> pl.DataFrame:
    aggs = [
        pl.len().cast(pl.Int64).alias("n"),
        *(pl.col(metric_column(parser, m)).cast(pl.Float64).mean().alias(m) for m in METRICS),
        *_refusal_aggs(parser),
        pl.col("gold_in_schema").mean().alias("gold_schema_coverage"),
        pl.col("failure").is_not_null().sum().cast(pl.Int64).alias("n_failed"),
        (pl.col("failure") == "too_long").sum().cast(pl.Int64).alias("n_too_long"),
    ]
    per_setting = graded.group_by("setting", maintain_order=True).agg(aggs)
    pooled = graded.select(aggs).with_columns(pl.lit(POOLED).alias("setting"))
    both = pl.concat([per_setting, pooled.select(per_setting.columns)])
    return both.with_columns(pl.lit(parser).alias("parser")).select(METRIC_COLUMNS)


def _refusal_aggs(parser: str) -> list[pl.Expr]:
    refused, should = pl.col(f"{parser}_refused"), pl.col("gold_tool").is_null()
    both = (refused & should).sum()
    return [pl.when(refused.sum() > 0).then(both / refused.sum()).otherwise(None).alias("refusal_precision"),
            pl.when(should.sum() > 0).then(both / should.sum()).otherwise(None).alias("refusal_recall")]


# Column order of metrics.parquet, stated once.
METRIC_COLUMNS = ("setting", "parser", "n", *METRICS, *REFUSAL_METRICS, "gold_schema_coverage",
                  "n_failed", "n_too_long")
