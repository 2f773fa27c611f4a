"""Grade every sample under every reading of its scorer: one row in, the same row out with grades.

The sample table names its scorer (`scorer` column); the scorer says which columns it reads,
which grade columns it adds and how a row is graded. Grading itself knows no benchmark.
A sample whose generation failed (too long, length, engine error) is wrong under every reading.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import polars as pl

from grading.errors import GradingError
from grading.scoring import Scorer, grade_columns, scorer_of

# Columns every scorer may read; inference writes them.
INPUT_COLUMNS = ("sample_id", "setting", "output", "failure")
# Written by inference in the native format (the family parser's calls); absent otherwise.
OPTIONAL_COLUMNS = ("prompt_format", "calls")


def grade(samples: pl.DataFrame, scorer: Scorer | None = None,
          progress: Callable[..., Iterable[Any]] | None = None) -> pl.DataFrame:
    """Add, for each reading of the table's scorer, the grade columns to the sample table.

    `scorer`: the table's own (its `scorer` column) unless given, as a run's end gives it (it looks
    its scorer up once); `progress(items, desc, total, unit)` may wrap the rows in a progress bar."""
    scorer = scorer or scorer_of(samples)
    _check_inputs(samples, scorer)
    optional = (*OPTIONAL_COLUMNS, *getattr(scorer, "optional_inputs", ()))
    present = [c for c in optional if c in samples.columns]
    rows = samples.select(*dict.fromkeys((*INPUT_COLUMNS, *scorer.inputs, *present))).to_dicts()
    pairs = [(reading, row) for reading in scorer.readings for row in rows]
    shown = progress(pairs, "grading", len(pairs), "grade") if progress else pairs
    grades = [scorer.grade_row(reading, row) for reading, row in shown]
    extra = []
    for k, reading in enumerate(scorer.readings):
        graded = grades[k * len(rows):(k + 1) * len(rows)]
        extra += [pl.Series(f"{reading}_{name}", [g[name] for g in graded], dtype=dtype)
                  for name, dtype in scorer.fields.items()]
    # Re-grading a graded table replaces its grade columns.
    return samples.drop([s.name for s in extra], strict=False).with_columns(extra)


def _check_inputs(samples: pl.DataFrame, scorer: Scorer) -> None:
    missing = [c for c in (*INPUT_COLUMNS, *scorer.inputs) if c not in samples.columns]
    if missing:
        raise GradingError(f"sample table lacks columns {missing} that scorer {scorer.name!r} reads; it has "
                           f"{samples.columns}. Was it written by toolsweep?")


__all__ = ["grade", "grade_columns", "INPUT_COLUMNS"]
