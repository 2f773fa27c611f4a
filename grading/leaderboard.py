"""The leaderboard of a sweep: one row per job x setting x reading, metrics with bootstrap CIs.

Metrics are recomputed from each job's samples.parquet (the same `summarize` that wrote its
metrics.parquet), so every interval is over exactly the samples behind its number. The
columns follow from the scorers of the jobs present. Failed jobs stay on the board with their
reason: a sweep's missing points must be visible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from grading.metrics import subset, summarize
from grading.plots import plot_by_step
from grading.report import markdown_table, value_ci, write_table
from grading.scoring import Metric, Scorer, get_scorer, scorer_of, source_arrays
from grading.stats import metric_ci
from grading.sweep import Job, find_jobs, job_step

BASE_SCHEMA: dict[str, pl.DataType] = {
    "job": pl.Int64, "model": pl.String, "model_path": pl.String, "step": pl.Int64,
    "judge": pl.String,  # the judge model's name, for benchmarks a judge scores (ETAPP)
    "scorer": pl.String, "setting": pl.String, "parser": pl.String, "n": pl.Int64,
}
TAIL_SCHEMA: dict[str, pl.DataType] = {
    "prompts_per_s": pl.Float64, "output_tokens_per_s": pl.Float64,
    "status": pl.String, "reason": pl.String, "overrides": pl.String,
}
# Reading a job's files can fail in these ways; the job then shows as failed, with the error.
_READ_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)


def metric_columns(metrics: list[Metric]) -> dict[str, pl.DataType]:
    """Each metric, with `_low` / `_high` bounds where it has a CI."""
    return {name: pl.Float64 for m in metrics
            for name in ((m.name, f"{m.name}_low", f"{m.name}_high") if m.ci else (m.name,))}


def leaderboard_schema(scorers: list[Scorer]) -> dict[str, pl.DataType]:
    """The board's columns for the scorers of its jobs (a metric name shared by two appears once)."""
    metrics = list({m.name: m for s in scorers for m in s.metrics}.values())
    return {**BASE_SCHEMA, **metric_columns(metrics), **TAIL_SCHEMA}


def build_leaderboard(sweep_dir: Path) -> pl.DataFrame:
    """The board: one row per complete job x setting x reading, one per failed job."""
    rows, scorers = [], {}
    for job in find_jobs(Path(sweep_dir)):
        job_board, scorer = job_rows(job)
        rows += job_board
        if scorer is not None:
            scorers[scorer.name] = scorer
    schema = leaderboard_schema(list(scorers.values()))
    return pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema)


def board_scorers(board: pl.DataFrame) -> list[Scorer]:
    """The scorers of a board's complete jobs, in job order."""
    return [get_scorer(n) for n in board["scorer"].drop_nulls().unique(maintain_order=True)]


def job_rows(job: Job) -> tuple[list[dict[str, Any]], Scorer | None]:
    """The rows of one job and its scorer; a complete job whose files cannot be read counts as failed."""
    if job.status != "complete":
        return _failed_rows(job, job.reason), None
    try:
        return _complete_rows(job)
    except _READ_ERRORS as exc:
        return _failed_rows(job, f"job.json says complete but its results are unreadable: {exc}"), None


def _complete_rows(job: Job) -> tuple[list[dict[str, Any]], Scorer]:
    run = _run_facts(job.path / "run.json")
    samples = pl.read_parquet(job.path / "samples.parquet")
    scorer = scorer_of(samples)
    judge = run.get("judge") if isinstance(run.get("judge"), dict) else {}
    base = {**_job_fields(job, run.get("model") or {}), "judge": judge.get("name"), "scorer": scorer.name}
    throughput = run.get("throughput") or {}
    rows = []
    for metrics in summarize(samples).iter_rows(named=True):
        frame, reading = subset(samples, metrics["setting"]), metrics["parser"]
        row = {**base, **metrics, "prompts_per_s": throughput.get("prompts_per_s"),
               "output_tokens_per_s": throughput.get("output_tokens_per_s"), "status": "complete"}
        for metric in scorer.metrics:
            if metric.ci:
                row[f"{metric.name}_low"], row[f"{metric.name}_high"] = \
                    metric_ci(metric, source_arrays(frame, reading, metric.sources))
        rows.append(row)
    return rows, scorer


def _failed_rows(job: Job, reason: str | None) -> list[dict[str, Any]]:
    return [{**_job_fields(job, {}), "setting": "all", "status": "failed", "reason": reason}]


def _job_fields(job: Job, model: dict[str, Any]) -> dict[str, Any]:
    model_path = job.model_path or model.get("path")
    name = model.get("name") or (Path(model_path).name if model_path else None)
    return {"job": job.number, "model": name, "model_path": model_path,
            "step": job_step(model_path, job.overrides), "overrides": " ".join(job.overrides)}


def _run_facts(path: Path) -> dict[str, Any]:
    # run.json only adds names and speeds; the grades come from samples.parquet.
    if not path.is_file():
        return {}
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return facts if isinstance(facts, dict) else {}


def shown_metrics(scorers: list[Scorer]) -> list[Metric]:
    """The metrics a board shows: each scorer's headline metrics, then its other CI metrics."""
    ordered = [m for s in scorers for m in sorted(s.metrics, key=lambda m: not m.headline) if m.ci]
    return list({m.name: m for m in ordered}.values())


def format_leaderboard(board: pl.DataFrame) -> str:
    """The leaderboard as Markdown: metrics as `41.2% [35.0, 47.1]` (95% bootstrap CI)."""
    metrics = shown_metrics(board_scorers(board))
    judged = board["judge"].null_count() < board.height  # a judge column only where a judge scored
    header = ["job", "model", *(["judge"] if judged else []), "step", "setting", "parser",
              *(m.name for m in metrics), "status", "reason"]
    rows = [[str(r["job"]), r["model"] or "", *([r["judge"] or ""] if judged else []),
             "" if r["step"] is None else str(r["step"]), r["setting"], r["parser"] or "",
             *(value_ci(m, r[m.name], r[f"{m.name}_low"], r[f"{m.name}_high"]) for m in metrics),
             r["status"], r["reason"] or ""]
            for r in board.iter_rows(named=True)]
    return markdown_table(header, rows)


def write_leaderboard(sweep_dir: Path) -> list[Path]:
    """leaderboard.parquet, leaderboard.md and, when a complete job has a step, leaderboard.png."""
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
    stepped = board.filter((pl.col("status") == "complete") & pl.col("step").is_not_null())
    if stepped.height and scorers:
        where = sweep_dir.resolve()
        title = f"{where.parent.name}/{where.name}: metrics by training step (95% bootstrap CI)"
        paths.append(plot_by_step(stepped, shown_metrics(scorers)[:3], sweep_dir / "leaderboard.png", title))
    return paths
