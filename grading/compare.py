"""`toolsweep-compare RUN_A RUN_B`: is run B better than run A on the same samples, or is it noise?

Samples are paired by sample_id, so each difference comes with a paired bootstrap 95% CI and
an exact McNemar p-value, and every sample that flipped between the runs is listed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.metrics import CORE_METRICS, METRICS, POOLED, metric_column
from grading.parsers import PARSERS
from grading.report import markdown_table, percent, percent_ci, write_table
from grading.stats import mcnemar_exact, paired_bootstrap_ci

COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "setting": pl.String, "parser": pl.String, "metric": pl.String, "n": pl.Int64,
    "acc_a": pl.Float64, "acc_b": pl.Float64, "diff": pl.Float64,
    "ci_low": pl.Float64, "ci_high": pl.Float64,
    "a_only": pl.Int64, "b_only": pl.Int64, "p_value": pl.Float64,
}
FLIP_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String, "setting": pl.String, "parser": pl.String, "metric": pl.String,
    "direction": pl.String,
}
_GRADE_COLUMNS = [metric_column(p, m) for p in PARSERS for m in METRICS]
_CORE_COLUMNS = [metric_column(p, m) for p in PARSERS for m in CORE_METRICS]
# How many unmatched ids an error message lists per side; the counts are always given.
_LISTED_IDS = 20


def compare_runs(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Paired comparison of two graded sample tables, and the samples that flipped.

    Returns (comparison, flips): comparison has one row per setting (and pooled "all") x
    parser x metric with acc_a, acc_b, diff = b - a, its paired bootstrap 95% CI, the
    discordant counts a_only / b_only and the exact McNemar p-value; flips has one row per
    sample x parser x metric whose grade differs, "gained" when B got it right and A did not.
    """
    paired = _pair(samples_a, samples_b)
    settings = [*paired["setting"].unique(maintain_order=True).to_list(), POOLED]
    rows = [_compare_cell(paired if s == POOLED else paired.filter(pl.col("setting") == s), s, p, m)
            for s in settings for p in PARSERS for m in METRICS]
    comparison = pl.DataFrame(rows, schema=COMPARISON_SCHEMA, orient="row").filter(pl.col("n") > 0)
    return comparison, _flips(paired)


def _pair(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> pl.DataFrame:
    for name, frame in (("A", samples_a), ("B", samples_b)):
        _check_table(name, frame)
    ids_a, ids_b = set(samples_a["sample_id"]), set(samples_b["sample_id"])
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise GradingError(
            f"runs A and B graded different samples: {len(only_a)} only in A "
            f"{only_a[:_LISTED_IDS]}, {len(only_b)} only in B {only_b[:_LISTED_IDS]}; compare runs "
            "of the same dataset.path, dataset.settings and dataset.limit")
    columns = ["sample_id", "setting", *_GRADE_COLUMNS]
    paired = samples_a.select(columns).join(samples_b.select(columns), on="sample_id", suffix="_b",
                                            maintain_order="left")
    moved = paired.filter(pl.col("setting") != pl.col("setting_b"))
    if moved.height:
        raise GradingError(f"{moved.height} samples have different settings in A and B, e.g. "
                           f"{moved.row(0, named=True)['sample_id']!r}; are these runs of the same benchmark?")
    return paired.drop("setting_b")


def _check_table(name: str, frame: pl.DataFrame) -> None:
    missing = [c for c in ("sample_id", "setting", *_GRADE_COLUMNS) if c not in frame.columns]
    if missing:
        raise GradingError(f"samples of run {name} lack columns {missing}; pass a graded samples.parquet "
                           "(re-grade an old run with toolsweep-grade RUN_DIR)")
    if frame.height == 0:
        raise GradingError(f"samples of run {name} are empty: there is nothing to compare")
    dupes = frame["sample_id"].filter(frame["sample_id"].is_duplicated()).unique().sort().to_list()
    if dupes:
        raise GradingError(f"samples of run {name} repeat sample_ids {dupes[:_LISTED_IDS]}; "
                           "each sample must appear once")
    nulls = [c for c in _CORE_COLUMNS if frame[c].null_count()]
    if nulls:
        raise GradingError(f"samples of run {name} have null grades in {nulls}; re-grade the run "
                           "with toolsweep-grade RUN_DIR")


def _compare_cell(paired: pl.DataFrame, setting: str, parser: str, metric: str) -> tuple:
    column = metric_column(parser, metric)
    # Metrics a benchmark defines for some samples only (an argument group) pair those samples.
    both = paired.filter(pl.col(column).is_not_null() & pl.col(f"{column}_b").is_not_null())
    a = both[column].cast(pl.Float64).to_numpy()
    b = both[f"{column}_b"].cast(pl.Float64).to_numpy()
    if a.size == 0:
        return (setting, parser, metric, 0, None, None, None, None, None, 0, 0, None)
    # A sample counts for the run that scored it higher; for 0/1 grades this is McNemar's
    # discordant pairs, for fractional scores the exact test is the sign test.
    a_only, b_only = int(np.sum(a > b)), int(np.sum(b > a))
    acc_a, acc_b = float(a.mean()), float(b.mean())
    low, high = paired_bootstrap_ci(a, b)
    return (setting, parser, metric, a.size, acc_a, acc_b, acc_b - acc_a, low, high,
            a_only, b_only, mcnemar_exact(b_only, a_only))


def _flips(paired: pl.DataFrame) -> pl.DataFrame:
    frames = [_flips_of(paired, parser, metric) for parser in PARSERS for metric in METRICS]
    return pl.concat(frames).cast(FLIP_SCHEMA)


def _flips_of(paired: pl.DataFrame, parser: str, metric: str) -> pl.DataFrame:
    column = metric_column(parser, metric)
    a, b = pl.col(column).cast(pl.Float64), pl.col(f"{column}_b").cast(pl.Float64)
    return paired.filter(a != b).select(
        "sample_id", "setting", pl.lit(parser).alias("parser"), pl.lit(metric).alias("metric"),
        pl.when(b > a).then(pl.lit("gained")).otherwise(pl.lit("lost")).alias("direction"))


def format_comparison(comparison: pl.DataFrame) -> str:
    """A Markdown table of the comparison, accuracies and differences in percent."""
    header = ["setting", "parser", "metric", "n", "acc_a", "acc_b", "diff [95% CI]",
              "a_only", "b_only", "p_value"]
    rows = [[r["setting"], r["parser"], r["metric"], str(r["n"]), percent(r["acc_a"]), percent(r["acc_b"]),
             percent_ci(r["diff"], r["ci_low"], r["ci_high"], signed=True),
             str(r["a_only"]), str(r["b_only"]), _p_value(r["p_value"])]
            for r in comparison.filter(pl.col("parser").is_in(PARSERS)).iter_rows(named=True)]
    return markdown_table(header, rows)


def _p_value(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def write_comparison(comparison: pl.DataFrame, flips: pl.DataFrame, out_dir: Path,
                     run_a: Path, run_b: Path) -> list[Path]:
    """comparison.parquet and flips.parquet in `out_dir`, naming both runs in the metadata."""
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"toolsweep_compare": {"run_a": str(run_a), "run_b": str(run_b)}}
    return [write_table(comparison, out_dir / "comparison.parquet", COMPARISON_SCHEMA, meta),
            write_table(flips, out_dir / "flips.parquet", FLIP_SCHEMA, meta)]


def samples_file(run: Path) -> Path:
    """The samples.parquet of a run dir or sweep job dir (or the file itself)."""
    path = run if run.suffix == ".parquet" else run / "samples.parquet"
    if not path.is_file():
        raise GradingError(f"{run} holds no samples.parquet; pass a finished run dir or a complete "
                           "job dir of a sweep (a failed job has none: see its job.json)")
    return path


def main(argv: list[str] | None = None) -> int:
    """Console entry point: compare two runs, write the tables, print the Markdown table."""
    parser = argparse.ArgumentParser(prog="toolsweep-compare", description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path, help="baseline run dir (or sweep job dir)")
    parser.add_argument("run_b", type=Path, help="run dir compared against RUN_A")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: RUN_B/compare_vs_<name of RUN_A>)")
    args = parser.parse_args(argv)
    try:
        samples_a = pl.read_parquet(samples_file(args.run_a))
        samples_b = pl.read_parquet(samples_file(args.run_b))
        comparison, flips = compare_runs(samples_a, samples_b)
        out = args.out or _default_out(args.run_a, args.run_b)
        paths = write_comparison(comparison, flips, out, args.run_a, args.run_b)
    except GradingError as exc:
        print(f"toolsweep-compare: error: {exc}", file=sys.stderr)
        return 2
    print(format_comparison(comparison))
    print(f"\n{flips.height} flips; wrote " + ", ".join(str(p) for p in paths))
    return 0


def _default_out(run_a: Path, run_b: Path) -> Path:
    # A samples.parquet path names its run by the folder around it.
    name_a = (run_a.parent if run_a.suffix == ".parquet" else run_a).resolve().name
    base_b = run_b.parent if run_b.suffix == ".parquet" else run_b
    return base_b / f"compare_vs_{name_a}"


if __name__ == "__main__":
    sys.exit(main())
