"""The leaderboard of a sweep: one row per job x setting x parser, accuracies with bootstrap CIs.

Accuracies are recomputed from each job's samples.parquet (the same `summarize` that wrote its
metrics.parquet), so every interval is over exactly the samples behind its number. Failed jobs
stay on the board with their reason: a sweep's missing points must be visible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from grading.metrics import POOLED, metric_column, summarize
from grading.parsers import PARSERS
from grading.plots import plot_accuracy_by_step
from grading.report import markdown_table, percent, percent_ci, write_table
from grading.stats import bootstrap_ci
from grading.sweep import Job, find_jobs, job_step

# Metrics that get a bootstrap CI; format_valid is reported as a plain rate.
CI_METRICS = ("tool_acc", "param_acc", "call_acc")

LEADERBOARD_SCHEMA: dict[str, pl.DataType] = {
    "job": pl.Int64, "model": pl.String, "model_path": pl.String, "step": pl.Int64,
    "setting": pl.String, "parser": pl.String, "n": pl.Int64,
    **{f"{m}{suffix}": pl.Float64 for m in CI_METRICS for suffix in ("", "_low", "_high")},
    "format_valid": pl.Float64, "prompts_per_s": pl.Float64, "output_tokens_per_s": pl.Float64,
    "status": pl.String, "reason": pl.String, "overrides": pl.String,
}

# Reading a job's files can fail in these ways; the job then shows as failed, with the error.
_READ_ERRORS = (pl.exceptions.PolarsError, OSError, ValueError)


def build_leaderboard(sweep_dir: Path) -> pl.DataFrame:
    """One row per complete job x setting x parser, one per failed job x parser; by job number."""
    rows = [row for job in find_jobs(Path(sweep_dir)) for row in job_rows(job)]
    return pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)


def job_rows(job: Job) -> list[dict[str, Any]]:
    """The leaderboard rows of one job; a complete job whose files cannot be read counts as failed."""
    if job.status != "complete":
        return _failed_rows(job, job.reason)
    try:
        return _complete_rows(job)
    except _READ_ERRORS as exc:
        return _failed_rows(job, f"job.json says complete but its results are unreadable: {exc}")


def _complete_rows(job: Job) -> list[dict[str, Any]]:
    run = _run_facts(job.path / "run.json")
    samples = pl.read_parquet(job.path / "samples.parquet")
    base = _job_fields(job, run.get("model") or {})
    throughput = run.get("throughput") or {}
    rows = []
    for metrics in summarize(samples).iter_rows(named=True):
        setting, parser = metrics["setting"], metrics["parser"]
        subset = samples if setting == POOLED else samples.filter(pl.col("setting") == setting)
        cis = {}
        for metric in CI_METRICS:
            cis[f"{metric}_low"], cis[f"{metric}_high"] = bootstrap_ci(subset[metric_column(parser, metric)])
        rows.append({**base, "setting": setting, "parser": parser, "n": metrics["n"],
                     **{m: metrics[m] for m in (*CI_METRICS, "format_valid")}, **cis,
                     "prompts_per_s": throughput.get("prompts_per_s"),
                     "output_tokens_per_s": throughput.get("output_tokens_per_s"),
                     "status": "complete", "reason": None})
    return rows


def _failed_rows(job: Job, reason: str | None) -> list[dict[str, Any]]:
    base = _job_fields(job, {})
    return [{**base, "setting": POOLED, "parser": parser, "status": "failed", "reason": reason}
            for parser in PARSERS]


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


def format_leaderboard(board: pl.DataFrame) -> str:
    """The leaderboard as Markdown: accuracies as `41.2% [35.0, 47.1]` (95% bootstrap CI)."""
    header = ["job", "model", "step", "setting", "parser", *CI_METRICS, "format_valid", "status", "reason"]
    rows = [[str(r["job"]), r["model"] or "", "" if r["step"] is None else str(r["step"]),
             r["setting"], r["parser"],
             *(percent_ci(r[m], r[f"{m}_low"], r[f"{m}_high"]) for m in CI_METRICS),
             percent(r["format_valid"]), r["status"], r["reason"] or ""]
            for r in board.iter_rows(named=True)]
    return markdown_table(header, rows)


def write_leaderboard(sweep_dir: Path) -> list[Path]:
    """leaderboard.parquet, leaderboard.md and, when a complete job has a step, leaderboard.png."""
    sweep_dir = Path(sweep_dir)
    board = build_leaderboard(sweep_dir)
    jobs = board.unique("job")
    meta = {"toolsweep_leaderboard": {"sweep_dir": str(sweep_dir.resolve()), "jobs": jobs.height,
                                      "failed": jobs.filter(pl.col("status") == "failed").height}}
    paths = [write_table(board, sweep_dir / "leaderboard.parquet", LEADERBOARD_SCHEMA, meta)]
    md = sweep_dir / "leaderboard.md"
    md.write_text(format_leaderboard(board) + "\n", encoding="utf-8")
    paths.append(md)
    stepped = board.filter((pl.col("status") == "complete") & pl.col("step").is_not_null())
    if stepped.height:
        where = sweep_dir.resolve()
        title = f"{where.parent.name}/{where.name}: accuracy by training step (95% bootstrap CI)"
        paths.append(plot_accuracy_by_step(stepped, sweep_dir / "leaderboard.png", title))
    return paths
