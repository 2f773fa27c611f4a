"""A run's graded outputs, written the one way every entry point writes them.

`toolsweep` and `toolsweep judge` (at the end of a run) and `toolsweep grade` (on a finished
run) all call `write_graded`: grade with the scorer the rows name (looked up once, then handed
to each step), summarize with the scorer's metrics and subsets, then samples.parquet,
metrics.parquet, slices.parquet, passk.parquet (runs of several samples per record), metrics.md
and report.html.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import polars as pl

from grading.grades import grade
from grading.html_report import write_run_report
from grading.metrics import report_groups, summarize
from grading.repeats import CURVE_SCHEMA, pass_curve, samples_per_record
from grading.report import write_markdown, write_metrics, write_samples, write_slices, write_table
from grading.scoring import Scorer, scorer_of
from grading.slices import slice_table


def write_graded(table: pl.DataFrame, run_dir: Path, meta: dict[str, Any], metrics_meta: Optional[dict[str, Any]] = None,
                 facts: Optional[dict[str, Any]] = None, progress: Optional[Callable[..., Any]] = None,
                 written: Callable[[str], None] = lambda name: None) -> tuple[pl.DataFrame, pl.DataFrame, Scorer]:
    """Grade `table`, write every report into `run_dir`; returns (graded, metrics, scorer).

    `meta` goes into samples.parquet's key-value metadata, `metrics_meta` (default `meta`) into
    the other tables'; `facts` stands in for run.json in report.html (a run writes run.json last).
    `written(file name)` is called after each file (a run marks its progress with it)."""
    scorer = scorer_of(table)  # looked up once, handed to every step below
    graded = grade(table, scorer, progress=progress)
    metrics = summarize(graded, scorer)
    others = metrics_meta if metrics_meta is not None else meta
    write_samples(graded, run_dir, meta, scorer)
    written("samples.parquet")
    write_metrics(metrics, scorer, run_dir, others)
    written("metrics.parquet")
    slices = slice_table(graded, scorer)
    write_slices(slices, scorer, run_dir, others)
    if samples_per_record(graded) > 1:
        write_table(pass_curve(report_groups(graded, scorer), scorer), run_dir / "passk.parquet", CURVE_SCHEMA, others)
        written("passk.parquet")
    write_markdown(metrics, scorer, run_dir, slices)
    write_run_report(run_dir, facts, scorer)
    written("report.html")
    return graded, metrics, scorer
