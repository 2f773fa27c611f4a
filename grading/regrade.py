"""`toolsweep grade RUN_DIR`: re-grade a finished run, or every complete job of a sweep.

Grading needs only the stored outputs, so a grader fix (or a new parser) can be applied to
old runs without the model. The Parquet run facts of the original files are kept.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional

import polars as pl

from grading.errors import GradingError
from grading.leaderboard import format_leaderboard, write_leaderboard
from grading.outputs import write_graded
from grading.report import format_table, read_metadata
from grading.scoring import Scorer
from grading.sweep import find_jobs, is_sweep_dir


Refresh = Callable[[pl.DataFrame, Path], pl.DataFrame]
"""(samples, run dir) -> samples with columns a newer loader adds (the `toolsweep grade` entry
point in inference/ passes one that reads the benchmark's files; grading never imports them)."""


def regrade_run(run_dir: Path, refresh: Optional[Refresh] = None) -> tuple[pl.DataFrame, Scorer]:
    """Re-grade RUN_DIR/samples.parquet with the scorer its rows name; rewrite samples, metrics,
    slices, metrics.md and report.html; return the metrics and the scorer."""
    samples_path, metrics_path = run_dir / "samples.parquet", run_dir / "metrics.parquet"
    if not samples_path.is_file():
        raise GradingError(f"{run_dir} holds no samples.parquet; pass a finished run dir")
    samples_meta = read_metadata(samples_path)
    # A run killed between the two writes has samples but no metrics: reuse the samples' facts.
    metrics_meta = read_metadata(metrics_path) if metrics_path.is_file() else samples_meta
    samples = pl.read_parquet(samples_path)
    _, metrics, scorer = write_graded(refresh(samples, run_dir) if refresh else samples, run_dir, samples_meta,
                                      metrics_meta)
    return metrics, scorer


def regrade_sweep(sweep_dir: Path, refresh: Optional[Refresh] = None) -> list[Path]:
    """Re-grade every complete job of a sweep, then rewrite its leaderboard; returns the paths written."""
    for job in find_jobs(sweep_dir):
        if job.status == "complete":
            regrade_run(job.path, refresh)
    return write_leaderboard(sweep_dir)


def build_parser(prog: str = "toolsweep-grade") -> argparse.ArgumentParser:
    """The parser of `toolsweep grade`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run dir (with samples.parquet) or a sweep dir")
    return parser


def main(argv: list[str] | None = None, refresh: Optional[Refresh] = None, prog: str = "toolsweep-grade") -> int:
    """Console entry point: re-grade a run dir or a sweep dir and print the result."""
    args = build_parser(prog).parse_args(argv)
    try:
        print(_regrade(args.run_dir, refresh))
    except GradingError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _regrade(target: Path, refresh: Optional[Refresh] = None) -> str:
    if (target / "samples.parquet").is_file():
        return format_table(*regrade_run(target, refresh))
    if is_sweep_dir(target):
        paths = regrade_sweep(target, refresh)
        return format_leaderboard(pl.read_parquet(target / "leaderboard.parquet")) + "\n\nwrote " + ", ".join(str(p) for p in paths)
    raise GradingError(f"{target} is neither a run dir (no samples.parquet) nor a sweep dir (no numbered "
                       "job dirs 0/, 1/, ...); pass the folder a toolsweep run or `toolsweep -m` wrote")


if __name__ == "__main__":
    sys.exit(main())
