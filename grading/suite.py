"""The suite table of a sweep over several benchmarks: which configuration is best on which benchmark.

One row per configuration (a job's overrides without those that choose its data: `dataset=...`,
`dataset.*`, `+suite=...`, `data_root=...`), one column per benchmark holding the headline metric its
scorer declares, on the pooled setting and under the scorer's primary reading, with its 95%
bootstrap CI: the very cell of that job's row on the leaderboard. Nothing here names a benchmark:
the columns follow from the jobs' `dataset.name`, the metric from their scorers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import polars as pl
import yaml

from grading.metrics import POOLED
from grading.plots import SCORED
from grading.report import markdown_table, value_ci, write_table
from grading.scoring import Metric, Scorer, get_scorer, primary_reading
from grading.sweep import Job, find_jobs, override_key, override_value

SUITE_PARQUET, SUITE_MD = "suite.parquet", "suite.md"
# Overrides that choose what a job is evaluated on rather than what is evaluated.
_DATA_KEYS = ("dataset", "suite", "data_root")
ROW_SCHEMA: dict[str, pl.DataType] = {"configuration": pl.String, "step": pl.Int64, "model_path": pl.String}


@dataclass(frozen=True)
class Cell:
    """One benchmark's headline for one configuration: the job that ran it and how it ended."""

    benchmark: str
    configuration: str
    job: int
    step: int | None
    model_path: str | None
    status: str
    """complete, stopped (by a racing sweep: the value is on the records it has) or failed."""
    reason: str | None
    metric: Metric | None
    reading: str | None
    value: float | None = None
    low: float | None = None
    high: float | None = None


def is_data_override(override: str) -> bool:
    """Whether an override chooses a job's data (its benchmark, that benchmark's options, the data root)."""
    key = override_key(override)
    return key in _DATA_KEYS or key.startswith("dataset.")


def configuration(overrides: Sequence[str]) -> str:
    """A job's configuration: its overrides but the data ones, in order ("(defaults)" for none)."""
    return " ".join(o for o in overrides if not is_data_override(o)) or "(defaults)"


def job_benchmark(job: Job) -> str | None:
    """The benchmark (dataset.name) a job ran, from the config Hydra wrote into its dir before it ran
    (so a failed job has one too), else its `dataset=` override."""
    path = job.path / ".hydra" / "config.yaml"
    try:
        name = ((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("dataset") or {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        name = None
    return str(name) if name else override_value(job.overrides, "dataset")


def headline_metric(scorer: Scorer) -> Metric:
    """The scorer's first declared headline metric, else its first metric."""
    return next((m for m in scorer.metrics if m.headline), scorer.metrics[0])


def suite_cells(board: pl.DataFrame, jobs: Sequence[Job]) -> tuple[list[Cell], list[str]]:
    """A cell per job of the board, and notes on jobs left out (a second job of one configuration and
    benchmark: the board keeps it, the table the first)."""
    benchmarks = {job.number: job_benchmark(job) for job in jobs}
    cells: dict[tuple[str, str], Cell] = {}
    notes = []
    for row in board.unique("job", maintain_order=True).sort("job").iter_rows(named=True):
        benchmark = benchmarks.get(row["job"]) or "(unknown)"
        cell = _cell(board.filter(pl.col("job") == row["job"]), row, benchmark)
        key = (cell.configuration, benchmark)
        if key in cells:
            notes.append(f"job {cell.job} ({benchmark}) has the configuration of job {cells[key].job}: "
                         "left out of the suite table (it is on the leaderboard)")
            continue
        cells[key] = cell
    return list(cells.values()), notes


def _cell(rows: pl.DataFrame, first: dict[str, Any], benchmark: str) -> Cell:
    where = dict(benchmark=benchmark, configuration=configuration(first["overrides"] or []), job=first["job"],
                 step=first["step"], model_path=first["model_path"], status=first["status"], reason=first["reason"])
    if first["status"] not in SCORED or first["scorer"] is None:
        return Cell(**where, metric=None, reading=None)
    scorer = get_scorer(first["scorer"])
    metric, reading = headline_metric(scorer), primary_reading(scorer)
    read = rows.filter(pl.col("parser") == reading)
    settings = read["setting"].to_list()
    pooled = read.filter(pl.col("setting") == (POOLED if POOLED in settings else settings[0])) if settings else read
    if pooled.height == 0 or metric.name not in pooled.columns:
        return Cell(**where, metric=metric, reading=reading)
    values = [pooled[c][0] if c in pooled.columns else None
              for c in (metric.name, f"{metric.name}_low", f"{metric.name}_high")]
    return Cell(**where, metric=metric, reading=reading, value=values[0], low=values[1], high=values[2])


def benchmarks_of(cells: Sequence[Cell]) -> list[str]:
    """The benchmarks of the cells, in job order."""
    return list(dict.fromkeys(c.benchmark for c in cells))


def best_jobs(cells: Sequence[Cell]) -> set[int]:
    """The job of the best value per benchmark (every one tied for it), among complete jobs, by the
    metric's declared direction; none for a metric with no better direction."""
    best = set()
    for benchmark in benchmarks_of(cells):
        scored = [c for c in cells if c.benchmark == benchmark and c.status == "complete" and c.value is not None]
        if not scored or scored[0].metric is None or scored[0].metric.higher_is_better is None:
            continue
        pick = max if scored[0].metric.higher_is_better else min
        top = pick(c.value for c in scored)
        best |= {c.job for c in scored if c.value == top}
    return best


def suite_schema(benchmarks: Sequence[str]) -> dict[str, pl.DataType]:
    """suite.parquet's columns: the row's configuration, then per benchmark its headline with CI,
    the job, its status and whether it is the column's best."""
    columns = dict(ROW_SCHEMA)
    for name in benchmarks:
        columns |= {name: pl.Float64, f"{name}_low": pl.Float64, f"{name}_high": pl.Float64,
                    f"{name}_job": pl.Int64, f"{name}_status": pl.String, f"{name}_best": pl.Boolean}
    return columns


def suite_frame(cells: Sequence[Cell]) -> pl.DataFrame:
    """The table: one row per configuration (in job order), one group of columns per benchmark."""
    benchmarks, best = benchmarks_of(cells), best_jobs(cells)
    rows: dict[str, dict[str, Any]] = {}
    for c in cells:
        row = rows.setdefault(c.configuration, {"configuration": c.configuration, "step": c.step,
                                                "model_path": c.model_path})
        row |= {c.benchmark: c.value, f"{c.benchmark}_low": c.low, f"{c.benchmark}_high": c.high,
                f"{c.benchmark}_job": c.job, f"{c.benchmark}_status": c.status,
                f"{c.benchmark}_best": c.job in best}
    schema = suite_schema(benchmarks)
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows.values()], schema=schema)


def suite_header(cells: Sequence[Cell]) -> list[str]:
    """The table's header: each benchmark with the metric and reading its column shows."""
    heads = []
    for benchmark in benchmarks_of(cells):
        shown = next((c for c in cells if c.benchmark == benchmark and c.metric is not None), None)
        heads.append(f"{benchmark}: {shown.metric.name}, {shown.reading}" if shown else benchmark)
    return ["configuration", "step", *heads]


def suite_rows(cells: Sequence[Cell]) -> list[list[str]]:
    """The table's rows as text: `41.2% [35.0, 47.1]`, the best per column in bold, a failed job as
    `failed (job N)`, a stopped one's value marked stopped."""
    benchmarks, best = benchmarks_of(cells), best_jobs(cells)
    by_config: dict[str, dict[str, Cell]] = {}
    for c in cells:
        by_config.setdefault(c.configuration, {})[c.benchmark] = c
    rows = []
    for config, found in by_config.items():
        step = next((c.step for c in found.values() if c.step is not None), None)
        rows.append([config, "" if step is None else str(step), *(_text(found.get(b), best) for b in benchmarks)])
    return rows


def _text(cell: Cell | None, best: set[int]) -> str:
    if cell is None:
        return "not run"
    if cell.status == "failed":
        return f"failed (job {cell.job})"
    shown = value_ci(cell.metric, cell.value, cell.low, cell.high) or "no value"
    if cell.status == "stopped":
        return f"{shown} (stopped, job {cell.job})"
    return f"**{shown}**" if cell.job in best else shown


def format_suite(cells: Sequence[Cell], notes: Sequence[str]) -> str:
    """suite.md: the table, what a cell is, and the notes."""
    lines = [markdown_table(suite_header(cells), suite_rows(cells)), "",
             "Each cell: the benchmark's headline metric on its pooled setting under its primary reading, with "
             "its 95% bootstrap CI (the job's row on leaderboard.md); the best per column in bold.",
             *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def write_suite(sweep_dir: Path, board: pl.DataFrame) -> list[Path]:
    """suite.parquet and suite.md when the sweep's jobs span more than one benchmark (else none, and
    any earlier ones removed: a rerun over one benchmark must not show a stale suite)."""
    sweep_dir = Path(sweep_dir)
    cells, notes = suite_cells(board, find_jobs(sweep_dir))
    targets = (sweep_dir / SUITE_PARQUET, sweep_dir / SUITE_MD)
    if len(benchmarks_of(cells)) < 2:
        for target in targets:
            target.unlink(missing_ok=True)
        return []
    meta = {"toolsweep_suite": {c.benchmark: {"metric": c.metric.name, "reading": c.reading, "setting": POOLED,
                                              "higher_is_better": c.metric.higher_is_better}
                                for c in reversed(cells) if c.metric is not None}}
    frame = suite_frame(cells)
    paths = [write_table(frame, targets[0], suite_schema(benchmarks_of(cells)), meta)]
    targets[1].write_text(format_suite(cells, notes), encoding="utf-8")
    return [*paths, targets[1]]


def suite_figures(board: pl.DataFrame, cells: Sequence[Cell]) -> list[tuple[str, Metric, Any]]:
    """One small figure per benchmark whose jobs have a step: its headline on the pooled setting
    against training step, one line per configuration but the checkpoint (grading.plots.step_figure)."""
    from grading.plots import step_figure

    figures = []
    for benchmark in benchmarks_of(cells):
        mine = [c for c in cells if c.benchmark == benchmark and c.metric is not None and c.step is not None]
        if not mine:
            continue
        rows = board.filter(pl.col("job").is_in([c.job for c in mine]) & pl.col("status").is_in(SCORED)
                            & (pl.col("setting") == POOLED))
        if rows.height == 0 or rows[mine[0].metric.name].drop_nulls().len() == 0:
            continue
        # the data overrides name the benchmark, which the figure's title says once
        rows = rows.with_columns(pl.Series("overrides", [[o for o in (x or []) if not is_data_override(o)]
                                                         for x in rows["overrides"].to_list()],
                                           dtype=pl.List(pl.String)))
        title = f"{benchmark}: {mine[0].metric.name} by training step (95% bootstrap CI)"
        figures.append((benchmark, mine[0].metric, step_figure(rows, [mine[0].metric], title, f"the {benchmark} plot")))
    return figures
