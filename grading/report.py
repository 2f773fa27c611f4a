"""Disk is the edge: the one place each report table is written, with its schema, and the table printed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl
import pyarrow.parquet as pq

from grading.files import atomic_write
from grading.grades import grade_schema
from grading.metrics import CORE_METRICS, METRIC_COLUMNS, METRICS, REFUSAL_METRICS
from grading.parsers import PARSERS

# samples.parquet: generation columns written by inference, then the grades.
SAMPLE_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String,
    "setting": pl.String,
    "entry_id": pl.Int64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "output": pl.String,
    "finish_reason": pl.String,
    "failure": pl.String,
    "error": pl.String,
    "gold_tool": pl.String,     # null: the right answer is to refuse
    "gold_params": pl.String,
    # how this sample is compared with its gold, as its benchmark declares (grading.rules)
    "official_parser": pl.String,
    "name_rule": pl.String,
    "value_rule": pl.String,
    "params_rule": pl.String,
    "tool_apps": pl.String,
    "param_groups": pl.String,
    "gold_in_schema": pl.Boolean,
    "schema_id": pl.String,
    "history_dropped": pl.Int64,
}
for _parser in PARSERS:
    SAMPLE_SCHEMA.update(grade_schema(_parser))

METRIC_SCHEMA: dict[str, pl.DataType] = {
    c: pl.String if c in ("setting", "parser") else pl.Int64 if c.startswith("n") else pl.Float64
    for c in METRIC_COLUMNS
}


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


def write_samples(graded: pl.DataFrame, run_dir: Path, metadata: Mapping[str, Any] | None = None) -> Path:
    """samples.parquet: one row per sample, generation facts and per-parser grades."""
    return write_table(graded, run_dir / "samples.parquet", SAMPLE_SCHEMA, metadata)


def write_metrics(metrics: pl.DataFrame, run_dir: Path, metadata: Mapping[str, Any] | None = None) -> Path:
    """metrics.parquet: one row per setting x parser, `setting == "all"` pooled."""
    return write_table(metrics, run_dir / "metrics.parquet", METRIC_SCHEMA, metadata)


def read_metadata(path: Path) -> dict[str, Any]:
    """The run facts stored in a report's Parquet key-value metadata."""
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): json.loads(v) for k, v in meta.items() if not k.startswith(b"ARROW")}


def format_table(metrics: pl.DataFrame) -> str:
    """A Markdown table of the metrics, percentages with one decimal.

    Metrics the benchmark does not define (null in every row) are left out.
    """
    shown = [m for m in (*METRICS, *REFUSAL_METRICS)
             if m in CORE_METRICS or metrics[m].null_count() < metrics.height]
    cols = ["setting", "parser", "n", *shown, "gold_schema_coverage", "n_failed"]
    head = "| " + " | ".join(cols) + " |"
    rule = "|" + "|".join("---" for _ in cols) + "|"
    body = ["| " + " | ".join(_cell(r[c]) for c in cols) + " |" for r in metrics.iter_rows(named=True)]
    return "\n".join([head, rule, *body])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{100 * value:.1f}%"
    return str(value)


def write_markdown(metrics: pl.DataFrame, run_dir: Path) -> Path:
    """metrics.md beside the Parquet report, for reading without Python."""
    path = run_dir / "metrics.md"
    path.write_text(format_table(metrics) + "\n", encoding="utf-8")
    return path


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


def percent_ci(value: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    """An accuracy with its interval in percent, e.g. `41.2% [35.0, 47.1]`."""
    if value is None or math.isnan(value):
        return ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return percent(value, signed)
    fmt = "{:+.1f}" if signed else "{:.1f}"
    return f"{percent(value, signed)} [{fmt.format(100 * low)}, {fmt.format(100 * high)}]"
