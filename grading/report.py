"""Disk is the edge: the one place each report table is written, with its schema, and the table printed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl
import pyarrow.parquet as pq

from grading.files import atomic_write
from grading.metrics import metrics_schema
from grading.repeats import PASS_AT, PASS_HAT, pass_metrics
from grading.scoring import (Scorer, format_value, grade_columns, metric_by_name, primary_reading,
                             scorer_of)

# samples.parquet: generation columns written by inference; then the scorer's inputs and grades.
BASE_SAMPLE_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String,
    "record_id": pl.String,      # the benchmark's record: sample_id without `#i` (decoding.samples > 1)
    "sample_index": pl.Int64,    # which of the record's decoding.samples generations (0..k-1)
    "setting": pl.String,
    "entry_id": pl.Int64,
    "scorer": pl.String,         # the grading.scorers module that grades this row
    "prompt_format": pl.String,  # benchmark (the benchmark's answer format) or native (tool calls)
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "output": pl.String,
    "calls": pl.String,          # native format: the family parser's calls, JSON [{name, arguments}]
    "finish_reason": pl.String,
    "failure": pl.String,
    "error": pl.String,
    "gold_in_schema": pl.Boolean,
    "schema_id": pl.String,
    "history_dropped": pl.Int64,
}
# A table written before repeated samples (or by hand) is one sample per record.
_ONE_SAMPLE = {"record_id": pl.col("sample_id").alias("record_id"),
               "sample_index": pl.lit(0, dtype=pl.Int64).alias("sample_index")}
# The count columns a metrics table shows (those its scorer has); n_too_long stays in the Parquet file.
_SHOWN_COUNTS = ("gold_schema_coverage", "n_failed")
# Columns a table written by an older toolsweep (or by hand) may lack: written as nulls.
_FILLABLE = ("scorer", "prompt_format", "calls", "prompt_tokens", "output_tokens", "finish_reason",
             "error", "gold_in_schema", "schema_id", "history_dropped", "entry_id")


def sample_schema(scorer: Scorer) -> dict[str, pl.DataType]:
    """Column names and types of samples.parquet for one scorer (its inputs are JSON text unless
    the scorer types them)."""
    typed = getattr(scorer, "input_types", {})
    inputs = (*scorer.inputs, *getattr(scorer, "optional_inputs", ()))
    return {**BASE_SAMPLE_SCHEMA, **{c: typed.get(c, pl.String) for c in inputs}, **grade_columns(scorer)}


def write_table(frame: pl.DataFrame, path: Path, schema: Mapping[str, pl.DataType],
                metadata: Mapping[str, Any] | None = None) -> Path:
    """Write `frame` with exactly `schema`'s columns and types, atomically, with run facts."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise ValueError(f"cannot write {path.name}: columns {missing} are missing")
    table = frame.select([pl.col(c).cast(t) for c, t in schema.items()]).to_arrow()
    if metadata:
        kv = {k: json.dumps(v, default=str) for k, v in metadata.items()}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **kv})
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def write_samples(graded: pl.DataFrame, run_dir: Path, metadata: Mapping[str, Any] | None = None,
                  scorer: Scorer | None = None) -> Path:
    """samples.parquet: one row per sample, generation facts, the scorer's inputs and grades.
    `scorer`: the table's own unless given."""
    scorer = scorer or scorer_of(graded)
    absent = [pl.lit(scorer.name if c == "scorer" else None, dtype=BASE_SAMPLE_SCHEMA[c]).alias(c)
              for c in _FILLABLE if c not in graded.columns]
    absent += [column for name, column in _ONE_SAMPLE.items() if name not in graded.columns]
    absent += [pl.lit(None, dtype=pl.String).alias(c) for c in getattr(scorer, "optional_inputs", ())
               if c not in graded.columns]
    return write_table(graded.with_columns(absent), run_dir / "samples.parquet", sample_schema(scorer), metadata)


def write_metrics(metrics: pl.DataFrame, scorer: Scorer, run_dir: Path,
                  metadata: Mapping[str, Any] | None = None) -> Path:
    """metrics.parquet: one row per setting x reading, `setting == "all"` pooled."""
    return write_table(metrics, run_dir / "metrics.parquet", metrics_schema(scorer), metadata)


def read_metadata(path: Path) -> dict[str, Any]:
    """The run facts stored in a report's Parquet key-value metadata."""
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): json.loads(v) for k, v in meta.items() if not k.startswith(b"ARROW")}


def format_table(metrics: pl.DataFrame, scorer: Scorer) -> str:
    """A Markdown table of the metrics: shares as percentages, scores as numbers.

    Metrics undefined in every row (e.g. a group no sample has) are left out.
    """
    return markdown_table(*metrics_cells(metrics, scorer))


def metrics_cells(metrics: pl.DataFrame, scorer: Scorer) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the metrics table as every report shows it (Markdown and HTML): metrics
    defined in some row, then the count columns the scorer's table has."""
    shown = [m.name for m in scorer.metrics if metrics[m.name].null_count() < metrics.height]
    repeated = repeated_samples(metrics)
    passes = [c for m in pass_metrics(scorer) for c in (f"{m.name}_{PASS_AT}", f"{m.name}_{PASS_HAT}")
              if repeated and metrics[c].null_count() < metrics.height]
    cols = ["setting", "parser", "n", *(["samples"] if repeated else []), *shown, *passes,
            *(c for c in _SHOWN_COUNTS if c in metrics.columns)]
    header = [pass_heading(c) for c in cols]
    return header, [[_cell(scorer, c, r, repeated) for c in cols] for r in metrics.iter_rows(named=True)]


def repeated_samples(table: pl.DataFrame) -> bool:
    """Whether a metrics table (or board) has rows of more than one sample per record."""
    return "samples" in table.columns and bool((table["samples"].fill_null(1) > 1).any())


def pass_heading(column: str) -> str:
    """A pass column as a table heads it: `tool_acc pass@k` / `tool_acc pass^k` (others as they are)."""
    return column.replace(f"_{PASS_AT}", " pass@k").replace(f"_{PASS_HAT}", " pass^k")


def _cell(scorer: Scorer, column: str, row: dict[str, Any], repeated: bool = False) -> str:
    value = row[column]
    if column == "gold_schema_coverage":
        return percent(value)
    if column.endswith((f"_{PASS_AT}", f"_{PASS_HAT}")):
        return percent(value)
    if any(m.name == column for m in scorer.metrics):
        metric = metric_by_name(scorer, column)
        return with_sd(metric, format_value(metric, value), row.get(f"{column}_sd") if repeated else None)
    return "" if value is None else str(value)


def with_sd(metric: Any, text: str, sd: float | None) -> str:
    """A metric's cell with its between-sample sd (`41.2% ±3.1`, `4.20 ±0.31`) where it has one."""
    if not text or sd is None or math.isnan(sd):
        return text
    return f"{text} ±{100 * sd:.1f}" if metric.scale == "share" else f"{text} ±{sd:.2f}"


def write_markdown(metrics: pl.DataFrame, scorer: Scorer, run_dir: Path,
                   slices: pl.DataFrame | None = None) -> Path:
    """metrics.md beside the Parquet report, for reading without Python (slices after the table)."""
    path = run_dir / "metrics.md"
    text = format_table(metrics, scorer) + "\n"
    if slices is not None and slices.height:
        text += "\n## Slices (pooled settings; * fewer than 20 samples)\n\n" + format_slices(slices, scorer) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def write_slices(slices: pl.DataFrame, scorer: Scorer, run_dir: Path,
                 metadata: Mapping[str, Any] | None = None) -> Path:
    """slices.parquet: every metric with its CI per setting (and pooled) x reading x slice x band."""
    from grading.slices import slices_schema

    return write_table(slices, run_dir / "slices.parquet", slices_schema(scorer), metadata)


def format_slices(slices: pl.DataFrame, scorer: Scorer) -> str:
    """The pooled slices of the primary reading, headline metrics with their CIs."""
    shown = [m for m in scorer.metrics if m.headline] or list(scorer.metrics[:1])
    reading = primary_reading(scorer)
    rows = [[r["slice"], r["band"] + ("*" if r["small"] else ""), str(r["n"]),
             *(value_ci(m, r[m.name], r.get(f"{m.name}_low"), r.get(f"{m.name}_high")) for m in shown)]
            for r in slices.filter((pl.col("setting") == "all") & (pl.col("parser") == reading)).iter_rows(named=True)]
    return markdown_table(["slice", "band", "n", *(f"{m.name} ({reading})" for m in shown)], rows)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table of preformatted cells; `|` and newlines inside a cell are escaped."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
    return "\n".join([line(header), "|" + "|".join("---" for _ in header) + "|", *map(line, rows)])


def percent(value: float | None, signed: bool = False) -> str:
    """41.2% (or +3.3% when `signed`); an empty cell for a missing value."""
    if value is None or math.isnan(value):
        return ""
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def value_ci(metric: Any, value: float | None, low: float | None, high: float | None) -> str:
    """A metric with its interval as its scale shows it: `41.2% [35.0, 47.1]` or `4.20 [3.90, 4.45]`."""
    if metric is not None and metric.scale == "share":
        return percent_ci(value, low, high)
    if value is None or math.isnan(value):
        return ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{value:.2f}"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def percent_ci(value: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    """An accuracy with its interval in percent, e.g. `41.2% [35.0, 47.1]`."""
    if value is None or math.isnan(value):
        return ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return percent(value, signed)
    fmt = "{:+.1f}" if signed else "{:.1f}"
    return f"{percent(value, signed)} [{fmt.format(100 * low)}, {fmt.format(100 * high)}]"
