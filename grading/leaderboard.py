"""The leaderboard of a sweep: one row per job x setting x reading, metrics with bootstrap CIs.

Metrics are recomputed from each job's samples.parquet (the same `summarize` that wrote its
metrics.parquet), so every interval is over exactly the samples behind its number. The
columns follow from the scorers of the jobs present. Failed jobs stay on the board with their
reason: a sweep's missing points must be visible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from grading.files import read_facts

from grading.html_report import AGAINST_FIRST, write_sweep_report
from grading.metrics import report_groups, summarize
from grading.plots import SCORED, plot_by_step, plottable
from grading.race import race_outcomes
from grading.repeats import repeat_columns
from grading.report import markdown_table, write_table
from grading.scoring import Scorer, metric_columns, primary_reading, scorer_of
from grading.stats import metric_cis
from grading.suite import write_suite
from grading.sweep import Job, find_jobs, job_step
from grading.tables import board_scorers, leaderboard_cells
from grading.views import ablation_axis, judge_model, judge_view

BASE_SCHEMA: dict[str, pl.DataType] = {
    "job": pl.Int64, "model": pl.String, "model_path": pl.String, "step": pl.Int64,
    "judge_model": pl.String,  # the judge's model name, where the scorer declares a judge view
    "ablation": pl.String,  # the value of the scorer's ablation axis (e.g. full, none, last_5), where it declares one
    "scorer": pl.String, "setting": pl.String, "parser": pl.String, "n": pl.Int64,
}
TAIL_SCHEMA: dict[str, pl.DataType] = {
    "prompts_per_s": pl.Float64, "output_tokens_per_s": pl.Float64,
    "status": pl.String, "reason": pl.String,
    "overrides": pl.List(pl.String),  # the job's Hydra overrides, one item each (a value may hold spaces)
}
# Reading a job's files can fail in these ways; the job then shows as failed, with the error.
_READ_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)


def leaderboard_schema(scorers: list[Scorer]) -> dict[str, pl.DataType]:
    """The board's columns for the scorers of its jobs (a metric name shared by two appears once)."""
    metrics = list({m.name: m for s in scorers for m in s.metrics}.values())
    repeats = {c: t for s in scorers for c, t in repeat_columns(s).items()}
    return {**BASE_SCHEMA, **metric_columns(metrics), **repeats, **TAIL_SCHEMA}


def build_leaderboard(sweep_dir: Path) -> pl.DataFrame:
    """The board: one row per complete job x setting x reading, one per failed job."""
    rows, scorers = [], {}
    for job in find_jobs(Path(sweep_dir)):
        job_board, scorer = job_rows(job)
        rows += job_board
        if scorer is not None:
            scorers[scorer.name] = scorer
    return with_race(board_frame(rows, list(scorers.values())), race_outcomes(Path(sweep_dir)))


def board_frame(rows: list[dict[str, Any]], scorers: list[Scorer]) -> pl.DataFrame:
    """Leaderboard rows (job_rows') as the board's table, under the schema of their scorers."""
    schema = leaderboard_schema(scorers)
    return pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema)


def with_race(board: pl.DataFrame, stopped: dict[int, str]) -> pl.DataFrame:
    """A racing sweep's stopped jobs: status `stopped`, the reason (round, records, the lead that
    stopped it); their metrics are on the samples they have (partial)."""
    if not stopped:
        return board
    job = pl.col("job")
    return board.with_columns(
        pl.when(job.is_in(list(stopped)) & (pl.col("status") == "complete")).then(pl.lit("stopped"))
        .otherwise(pl.col("status")).alias("status"),
        pl.when(job.is_in(list(stopped))).then(job.replace_strict(stopped, default=None, return_dtype=pl.String))
        .otherwise(pl.col("reason")).alias("reason"))


def job_rows(job: Job) -> tuple[list[dict[str, Any]], Scorer | None]:
    """The rows of one job and its scorer; a complete job whose files cannot be read counts as failed."""
    if job.status != "complete":
        return _failed_rows(job, job.reason), None
    try:
        return _complete_rows(job)
    except _READ_ERRORS as exc:
        return _failed_rows(job, f"job.json says complete but its results are unreadable: {exc}"), None


def _complete_rows(job: Job) -> tuple[list[dict[str, Any]], Scorer]:
    run = read_facts(job.path / "run.json")
    samples = pl.read_parquet(job.path / "samples.parquet")
    scorer = scorer_of(samples)
    axis = ablation_axis(scorer)
    base = {**_job_fields(job, run.get("model") or {}), "judge_model": judge_model(judge_view(scorer), run),
            "ablation": axis.label((run.get("config") or {})) if axis is not None else None, "scorer": scorer.name}
    throughput = run.get("throughput") or {}
    frames = dict(report_groups(samples, scorer))  # a metrics row's setting label -> its samples
    rows = []
    for metrics in summarize(samples, scorer).iter_rows(named=True):
        rows.append({**base, **metrics, "prompts_per_s": throughput.get("prompts_per_s"),
                     "output_tokens_per_s": throughput.get("output_tokens_per_s"), "status": "complete",
                     **metric_cis(scorer.metrics, frames[metrics["setting"]], metrics["parser"])})
    return rows, scorer


def _failed_rows(job: Job, reason: str | None) -> list[dict[str, Any]]:
    return [{**_job_fields(job, {}), "setting": "all", "status": "failed", "reason": reason}]


def _job_fields(job: Job, model: dict[str, Any]) -> dict[str, Any]:
    model_path = job.model_path or model.get("path")
    name = model.get("name") or (Path(model_path).name if model_path else None)
    return {"job": job.number, "model": name, "model_path": model_path,
            "step": job_step(model_path, job.overrides), "overrides": list(job.overrides)}




def format_leaderboard(board: pl.DataFrame) -> str:
    """The leaderboard as Markdown: metrics as `41.2% [35.0, 47.1]` (95% bootstrap CI)."""
    return markdown_table(*leaderboard_cells(board))


def write_leaderboard(sweep_dir: Path) -> list[Path]:
    """leaderboard.parquet, leaderboard.md, leaderboard.png when a complete job has a step, and
    report.html (the board, plots and ablations in one file for a browser)."""
    sweep_dir = Path(sweep_dir)
    board = build_leaderboard(sweep_dir)
    scorers = board_scorers(board)
    jobs = board.unique("job")
    meta = {"toolsweep_leaderboard": {"sweep_dir": str(sweep_dir.resolve()), "jobs": jobs.height,
                                      "failed": jobs.filter(pl.col("status") == "failed").height}}
    paths = [write_table(board, sweep_dir / "leaderboard.parquet", leaderboard_schema(scorers), meta)]
    md = sweep_dir / "leaderboard.md"
    md.write_text(format_leaderboard(board) + "\n", encoding="utf-8")
    paths.append(md)
    stepped = board.filter(pl.col("status").is_in(SCORED) & pl.col("step").is_not_null())
    metrics = plottable(stepped, scorers)[:3]
    if metrics:
        where = sweep_dir.resolve()
        title = f"{where.parent.name}/{where.name}: metrics by training step (95% bootstrap CI)"
        paths.append(plot_by_step(stepped, metrics, sweep_dir / "leaderboard.png", title))
    if (against := write_against_first(sweep_dir, board)) is not None:
        paths.append(against)
    paths += write_suite(sweep_dir, board)
    paths.append(write_sweep_report(sweep_dir))
    return paths


def write_against_first(sweep_dir: Path, board: pl.DataFrame) -> Path | None:
    """against_first.parquet: every other complete job against the sweep's first job (the base model,
    or the earliest checkpoint: how a guard benchmark is read), paired by sample, on
    the scorer's headline metrics under its primary reading, per setting: the paired bootstrap
    CI, McNemar's exact p and the verdict, as `toolsweep compare` gives them. None (and no file)
    where the first job or every other one did not complete, as the board (`board`) says."""
    from grading.compare import COMPARISON_SCHEMA, compare_runs
    from grading.errors import GradingError

    target = Path(sweep_dir) / AGAINST_FIRST
    target.unlink(missing_ok=True)
    # a failed job may have written samples.parquet, and a stopped one holds only some of the
    # records: neither is compared as if complete
    complete = set(board.filter(pl.col("status") == "complete")["job"].to_list())
    jobs = [job for job in find_jobs(sweep_dir) if job.number in complete]
    if len(jobs) < 2 or jobs[0].number != 0:
        return None
    base = pl.read_parquet(jobs[0].path / "samples.parquet")
    scorer = scorer_of(base)
    shown = [m.name for m in scorer.metrics if m.headline] or [scorer.metrics[0].name]
    frames = []
    for job in jobs[1:]:
        try:
            comparison, _ = compare_runs(base, pl.read_parquet(job.path / "samples.parquet"),
                                         readings=(primary_reading(scorer),), metrics=shown, flips=False)
        except GradingError:
            continue  # another scorer, or samples that cannot be paired: no row rather than a wrong one
        frames.append(comparison.with_columns(pl.lit(job.number, dtype=pl.Int64).alias("job")))
    if not frames:
        return None
    schema = {"job": pl.Int64, **COMPARISON_SCHEMA}
    table = pl.concat(frames).select(list(schema))
    return write_table(table, target, schema, {"toolsweep_against_first": {"scorer": scorer.name, "first_job": 0}})
