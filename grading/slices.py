"""Slices: every metric with its bootstrap CI on parts of a run (per setting and pooled), to see
*where* a model fails: by the cuts its scorer declares (e.g. gold category, stated history length,
tools the history combines, the gold's position among the candidates); every benchmark by
prompt-token band.
A band with fewer than MIN_N samples is kept and marked `small`, never hidden.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from grading.metrics import setting_order, subset
from grading.scoring import Scorer, Slice, bands, metric_columns, scorer_of
from grading.stats import metric_cis

MIN_N = 20
KEY_COLUMNS: dict[str, pl.DataType] = {"setting": pl.String, "parser": pl.String, "slice": pl.String,
                                       "band": pl.String, "n": pl.Int64, "small": pl.Boolean}
PROMPT_TOKENS = Slice("prompt_tokens", lambda row: bands(row.get("prompt_tokens"), (
    (1000, "<=1k"), (2000, "1-2k"), (4000, "2-4k"), (8000, "4-8k")), ">8k"),
    ("<=1k", "1-2k", "2-4k", "4-8k", ">8k"))


def slices_schema(scorer: Scorer) -> dict[str, pl.DataType]:
    """Column names and types of slices.parquet for one scorer."""
    return {**KEY_COLUMNS, **metric_columns(scorer.metrics)}


def scorer_slices(scorer: Scorer) -> tuple[Slice, ...]:
    return (*getattr(scorer, "slices", ()), PROMPT_TOKENS)


def slice_table(graded: pl.DataFrame, scorer: Scorer | None = None) -> pl.DataFrame:
    """One row per setting (and pooled) x reading x slice x band. `scorer`: the table's own unless given."""
    scorer = scorer or scorer_of(graded)
    cuts = scorer_slices(scorer)
    rows = graded.to_dicts()
    banded = graded.with_columns([pl.Series(f"_band_{c.name}", [c.band(r) for r in rows], dtype=pl.String)
                                  for c in cuts])
    out = []
    for setting in setting_order(graded):
        frame = subset(banded, setting)
        for cut in cuts:
            column = f"_band_{cut.name}"
            for band in _ordered(frame[column].drop_nulls().unique().to_list(), cut.order):
                part = frame.filter(pl.col(column) == band)
                out += [_row(scorer, part, setting, reading, cut.name, band) for reading in scorer.readings]
    return pl.DataFrame(out, schema=slices_schema(scorer), orient="row")


def _ordered(found: list[str], order: tuple[str, ...]) -> list[str]:
    return [b for b in order if b in found] + sorted(b for b in found if b not in order)


def _row(scorer: Scorer, frame: pl.DataFrame, setting: str, reading: str, name: str, band: str) -> dict[str, Any]:
    row: dict[str, Any] = {"setting": setting, "parser": reading, "slice": name, "band": band,
                           "n": frame.height, "small": frame.height < MIN_N}
    row.update({metric.name: metric.value(frame, reading) for metric in scorer.metrics})
    return {**row, **metric_cis(scorer.metrics, frame, reading, n_resamples=500)}
