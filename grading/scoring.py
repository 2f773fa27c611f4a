"""The scorer contract: how a benchmark's samples are graded and which metrics they give.

A scorer is one module in `grading/scorers/` (or any importable module, named by its dotted
path) that defines `SCORER`. It declares:

- `readings`: the ways an answer is read, e.g. `official` (the benchmark's own parser) and
  `json` (toolsweep's robust one); every grade column and metric exists once per reading;
- `inputs`: the extra sample-table columns its benchmark's loader must provide;
- `fields`: the per-sample grade columns it adds (as `{reading}_{field}`), with their types;
- `metrics`: what is reported, each a :class:`Metric` (name, source fields, aggregation,
  scale, whether it gets a bootstrap CI, and which way is better);
- `subsets`: parts of every setting reported beside it (`{setting}/{subset}` rows), each named by
  a Boolean sample or grade column (e.g. the cases whose data needed no substitute);
- `pools`: rows over several settings (e.g. `both/<method>`, one method over its two settings);
- `count_columns`: the sample counts its metrics table has besides the metrics
  (grading.metrics.COUNT_COLUMNS), only those that apply to its samples.

Every sample row names its scorer (`scorer` column), so re-grading needs no inference code,
and every report (metrics, leaderboard, comparison, plots) is derived from the scorer present,
including the views it declares (grading.views: cases, judge, outcomes, ablation axis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.registry import NotFound, find, names_in

SHARE, SCORE = "share", "score"
PRIMARY_READING = "official"
"""The reading a report shows when it shows one (plots, slices), where the scorer has it."""
DEFAULT_COUNTS = ("gold_schema_coverage", "n_failed", "n_too_long")
"""The count columns of a single-call benchmark answered under a tool schema (grading.metrics)."""
_PACKAGE = "grading.scorers"


@dataclass(frozen=True)
class Metric:
    """One reported number: an aggregation of per-sample grade fields over a group of samples."""

    name: str
    sources: tuple[str, ...]
    """Grade fields (without the reading prefix) the aggregation reads, in its argument order."""
    reduce: Callable[..., float | None]
    """Numpy arrays of the sources (nulls as nan) -> the value, or None where undefined."""
    scale: str = SHARE
    """`share`: a value in [0, 1], shown as a percentage; `score`: shown as is (e.g. 0-5)."""
    ci: bool = True
    """Whether reports give it a 95% bootstrap CI."""
    headline: bool = False
    """Shown first, and plotted against training step."""
    per_sample: bool = False
    """A plain mean of one per-sample source: paired tests and flips apply to it."""
    description: str = ""
    pooled: Callable[[np.ndarray], np.ndarray] | None = None
    """For a metric that reads the rows only through each source's sum (nulls as 0), such as F1
    over pooled counts or a ratio of sums: the same value as `reduce`, from those sums, for many
    groups of rows at once ((groups, sources) -> (groups,), nan where undefined). Its bootstrap
    then takes every resample in one pass (grading.stats.pooled_statistics)."""
    higher_is_better: bool | None = field(kw_only=True)
    """Which way is better (lm-evaluation-harness's `higher_is_better`): True for an accuracy,
    False for an error or failure share; None for a number with no better direction (e.g. mean
    turns), which a comparison calls higher or lower, never gained or lost. Every metric says."""

    def value(self, frame: pl.DataFrame, reading: str) -> float | None:
        """The metric over the rows of `frame` under `reading`."""
        return self.reduce(*source_arrays(frame, reading, self.sources))


def source_arrays(frame: pl.DataFrame, reading: str, sources: Sequence[str]) -> list[np.ndarray]:
    """The source columns of one reading as float arrays, nulls as nan."""
    return [frame[f"{reading}_{s}"].cast(pl.Float64).fill_null(np.nan).to_numpy() for s in sources]


def _mean(values: np.ndarray) -> float | None:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else None


def mean(name: str, source: str, *, higher_is_better: bool | None, scale: str = SHARE, ci: bool = True,
         headline: bool = False, description: str = "") -> Metric:
    """The mean of one per-sample field over the samples where it is not null."""
    return Metric(name, (source,), _mean, scale, ci, headline, per_sample=True, description=description,
                  higher_is_better=higher_is_better)


def _of_sums(of_sums: Callable[[np.ndarray], np.ndarray], arrays: Sequence[np.ndarray]) -> float | None:
    """A pooled metric over one group of rows: each source's sum (nulls as 0), then the formula its
    bootstrap applies to every resample at once (one definition for both)."""
    value = of_sums(np.array([[np.nansum(a) for a in arrays]], dtype=np.float64))[0]
    return None if np.isnan(value) else float(value)


def _f1_of_sums(sums: np.ndarray) -> np.ndarray:
    tp, fp, fn = sums[:, 0], sums[:, 1], sums[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        # nothing to find and nothing predicted: the level does not apply (nan)
        return np.where(tp + fp + fn == 0, np.nan, np.where(tp != 0, 2 * tp / (2 * tp + fp + fn), 0.0))


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> float | None:
    return _of_sums(_f1_of_sums, (tp, fp, fn))


def f1(name: str, prefix: str, *, headline: bool = False, description: str = "") -> Metric:
    """F1 over counts pooled across the samples (`{prefix}_tp`, `_fp`, `_fn` per sample): 0 with
    no true positive, None where the samples have neither gold nor predicted items at that level.
    Higher is better, as for any F1."""
    return Metric(name, (f"{prefix}_tp", f"{prefix}_fp", f"{prefix}_fn"), _f1, SHARE, True, headline,
                  description=description, pooled=_f1_of_sums, higher_is_better=True)


def _ratio_of_sums(sums: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums[:, 1] != 0, sums[:, 0] / sums[:, 1], np.nan)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> float | None:
    return _of_sums(_ratio_of_sums, (numerator, denominator))


def ratio(name: str, numerator: str, denominator: str, *, higher_is_better: bool | None, ci: bool = False,
          description: str = "") -> Metric:
    """sum(numerator) / sum(denominator) over the samples; None when the denominator is 0."""
    return Metric(name, (numerator, denominator), _ratio, SHARE, ci, description=description, pooled=_ratio_of_sums,
                  higher_is_better=higher_is_better)


def change_word(metric: Metric, increase: bool, good: str = "better", bad: str = "worse") -> str:
    """How a report names a change of `metric`: `good` or `bad` as its declared direction says,
    `higher` or `lower` for a metric with no better direction."""
    if metric.higher_is_better is None:
        return "higher" if increase else "lower"
    return good if increase == metric.higher_is_better else bad


def direction_note(metric: Metric) -> str:
    """`higher is better`, `lower is better` or `no better direction`, for a metric's definition."""
    if metric.higher_is_better is None:
        return "no better direction"
    return "higher is better" if metric.higher_is_better else "lower is better"


def metric_columns(metrics: Sequence[Metric]) -> dict[str, pl.DataType]:
    """Each metric's column, with `_low` / `_high` bounds where it has a CI (boards and slices)."""
    return {name: pl.Float64 for m in metrics
            for name in ((m.name, f"{m.name}_low", f"{m.name}_high") if m.ci else (m.name,))}


@dataclass(frozen=True)
class Slice:
    """A way to cut a run's samples: each row's band (None: the row is in no band)."""

    name: str
    band: Callable[[dict[str, Any]], str | None]
    order: tuple[str, ...] = ()
    """Bands in report order; others follow, sorted."""


def bands(value: Any, edges: Sequence[tuple[int, str]], above: str) -> str | None:
    """The label of the first edge `value` does not exceed (`above` past the last); None for no value."""
    if value is None or value == "":
        return None
    number = float(value)
    return next((label for edge, label in edges if number <= edge), above)


class Scorer(Protocol):
    """What grading needs from a scorer (see `RowScorer` for the usual implementation)."""

    name: str
    readings: tuple[str, ...]
    inputs: tuple[str, ...]
    fields: Mapping[str, pl.DataType]
    metrics: tuple[Metric, ...]
    subsets: Mapping[str, str]
    """Subset name -> Boolean sample column; optional (read through `subsets_of`)."""
    pools: Callable[[str], str | None] | None
    """Setting -> the label of a row pooling it with others; optional (read through `pools_of`)."""
    count_columns: tuple[str, ...]
    """Count columns of its metrics table; optional (read through `counts_of`)."""

    def grade_row(self, reading: str, row: dict[str, Any]) -> dict[str, Any]:
        """The grade fields of one sample row under one reading."""
        ...


@dataclass(frozen=True)
class RowScorer:
    """A scorer that grades each row on its own with `grade` (reading, row) -> fields."""

    name: str
    readings: tuple[str, ...]
    fields: Mapping[str, pl.DataType]
    metrics: tuple[Metric, ...]
    grade: Callable[[str, dict[str, Any]], dict[str, Any]]
    inputs: tuple[str, ...] = ()
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    input_types: Mapping[str, pl.DataType] = field(default_factory=dict)
    """Inputs stored with their own type in samples.parquet (the others are JSON text)."""
    optional_inputs: tuple[str, ...] = ()
    """Columns read when the table has them (a run written before its loader added them lacks
    them; `toolsweep grade` adds them from the benchmark's files)."""
    slices: tuple[Slice, ...] = ()
    """The cuts its data supports (slices.parquet); every scorer also gets prompt-token bands."""
    subsets: Mapping[str, str] = field(default_factory=dict)
    """Subset name -> Boolean sample column (one of its inputs, or one of its grade columns
    `{reading}_{field}`, so samples.parquet keeps it): every metrics table (run, re-grade, board,
    comparison) adds, after each setting's rows and after the pooled ones, `{setting}/{name}` rows
    over the samples where the column is true."""
    pools: Callable[[str], str | None] | None = None
    """A setting -> the label of a row that pools it with other settings (e.g. `given/fc` and
    `retrieval/fc` -> `both/fc`), or None for none. Every metrics table adds, after the
    settings' rows and before the pooled `all`, each label that gathers two or more of the run's
    settings, with its subsets; a metric defined only across settings lives there."""
    cases: Any = None
    """grading.case_view.CaseView: how report.html's cases.html shows a multi-turn run's cases."""
    judge_view: Any = None
    """grading.views.JudgeView: the role whose model scores its samples, its dimensions and scale
    (toolsweep agreement, the board's judge model)."""
    outcome_view: Any = None
    """grading.views.OutcomeView: a grade field sorting each answer into a taxonomy (report.html's
    outcome figure and table)."""
    ablation: Any = None
    """grading.views.AblationAxis: a config option a sweep may vary (the board's ablation column,
    the sweep report's figure, toolsweep compare's note)."""
    count_columns: tuple[str, ...] = DEFAULT_COUNTS
    """The count columns its metrics table has (names of grading.metrics.COUNT_COLUMNS): only those
    that apply to its samples (gold_schema_coverage needs a gold tool and a tool schema)."""

    def __post_init__(self) -> None:
        bad = [n for n in self.subsets if not n or "/" in n]
        if bad:
            raise GradingError(f"scorer {self.name!r}: subset names must be non-empty and hold no '/' (rows are "
                               f"named `{{setting}}/{{subset}}`), got {bad}; rename them")

    def grade_row(self, reading: str, row: dict[str, Any]) -> dict[str, Any]:
        return self.grade(reading, row)


def scorer_names() -> list[str]:
    """The scorers shipped in grading/scorers/ (any importable module path also works)."""
    return names_in(_PACKAGE)


@lru_cache(maxsize=64)
def get_scorer(name: str) -> Scorer:
    """The scorer called `name`: a module of grading/scorers/, or a dotted module path
    (`mypackage.my_scorer`) whose module defines SCORER."""
    try:
        return find(name, _PACKAGE, "SCORER")
    except NotFound as exc:
        raise GradingError(f"unknown scorer {name!r} ({exc}): choose one of {scorer_names()}, or give the "
                           "dotted path of a module that defines SCORER") from None


def scorer_of(samples: pl.DataFrame) -> Scorer:
    """The one scorer named by a sample table's `scorer` column (tables written before the column:
    the one grading.scorers declares for them)."""
    if "scorer" not in samples.columns:
        from grading.scorers import legacy_scorer

        return get_scorer(legacy_scorer(samples))
    names = samples["scorer"].drop_nulls().unique().sort().to_list()
    if len(names) != 1:
        raise GradingError(f"a sample table must name exactly one scorer in its `scorer` column, got {names}; "
                           "grade each benchmark's run on its own")
    return get_scorer(names[0])


def subsets_of(scorer: Scorer) -> Mapping[str, str]:
    """The scorer's subsets (name -> Boolean sample column); none for a scorer that declares none."""
    return getattr(scorer, "subsets", None) or {}


def pools_of(scorer: Scorer) -> Callable[[str], str | None] | None:
    """The scorer's setting -> pooled row label map; None for a scorer that pools no settings."""
    return getattr(scorer, "pools", None)


def counts_of(scorer: Scorer) -> tuple[str, ...]:
    """The count columns of the scorer's metrics table (DEFAULT_COUNTS where it declares none)."""
    return tuple(getattr(scorer, "count_columns", DEFAULT_COUNTS))


def primary_reading(scorer: Scorer) -> str:
    """The reading shown where a report shows one: `official` (the benchmark's own parser) where the
    scorer has it, else its first reading (a judged benchmark's only one, say)."""
    return PRIMARY_READING if PRIMARY_READING in scorer.readings else scorer.readings[0]


def grade_columns(scorer: Scorer) -> dict[str, pl.DataType]:
    """The `{reading}_{field}` columns the scorer adds, in table order."""
    return {f"{r}_{name}": dtype for r in scorer.readings for name, dtype in scorer.fields.items()}


def metric_by_name(scorer: Scorer, name: str) -> Metric:
    """The scorer's metric called `name`, or an error naming the ones it has."""
    for metric in scorer.metrics:
        if metric.name == name:
            return metric
    raise GradingError(f"scorer {scorer.name!r} has no metric {name!r}; it has "
                       f"{[m.name for m in scorer.metrics]}")


def format_value(metric: Metric | None, value: Any) -> str:
    """A metric value as a report shows it: shares as `41.2%`, scores as `4.20`."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if metric is not None and metric.scale == SHARE:
        return f"{100 * value:.1f}%"
    return f"{value:.2f}" if isinstance(value, float) else str(value)
