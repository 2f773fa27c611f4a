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
from grading.metrics import setting_order, subset
from grading.html_report import write_compare_report
from grading.report import markdown_table, write_table
from grading.scoring import Metric, Scorer, grade_columns, scorer_of, source_arrays
from grading.stats import mcnemar_exact, paired_bootstrap_ci
from grading.tables import comparison_cells

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
# How many unmatched ids an error message lists per side; the counts are always given.
_LISTED_IDS = 20


def compare_runs(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Paired comparison of two graded sample tables, and the samples that flipped.

    Returns (comparison, flips): comparison has one row per setting (and pooled "all") x
    parser x metric with acc_a, acc_b, diff = b - a, its paired bootstrap 95% CI, the
    discordant counts a_only / b_only and the exact McNemar p-value; flips has one row per
    sample x parser x metric whose grade differs, "gained" when B got it right and A did not.
    The metrics are the runs' scorer's; per-sample metrics get McNemar's test and flips,
    pooled ones (F1) a paired bootstrap CI only.
    """
    for name, frame in (("A", samples_a), ("B", samples_b)):
        if frame.height == 0:
            raise GradingError(f"samples of run {name} are empty: there is nothing to compare")
    scorer = _same_scorer(samples_a, samples_b)
    paired = _pair(samples_a, samples_b, scorer)
    rows = [_compare_cell(subset(paired, s), s, p, m)
            for s in setting_order(paired) for p in scorer.readings for m in scorer.metrics]
    comparison = pl.DataFrame(rows, schema=COMPARISON_SCHEMA, orient="row").filter(pl.col("n") > 0)
    return comparison, _flips(paired, scorer)


def _same_scorer(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> Scorer:
    scorer_a, scorer_b = scorer_of(samples_a), scorer_of(samples_b)
    if scorer_a.name != scorer_b.name:
        raise GradingError(f"run A is scored by {scorer_a.name!r} and run B by {scorer_b.name!r}; "
                           "compare runs of the same benchmark")
    return scorer_a


def _pair(samples_a: pl.DataFrame, samples_b: pl.DataFrame, scorer: Scorer) -> pl.DataFrame:
    grades = list(grade_columns(scorer))
    for name, frame in (("A", samples_a), ("B", samples_b)):
        _check_table(name, frame, grades)
    ids_a, ids_b = set(samples_a["sample_id"]), set(samples_b["sample_id"])
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise GradingError(
            f"runs A and B graded different samples: {len(only_a)} only in A "
            f"{only_a[:_LISTED_IDS]}, {len(only_b)} only in B {only_b[:_LISTED_IDS]}; compare runs "
            "of the same dataset.path, dataset.settings and dataset.limit")
    columns = ["sample_id", "setting", *grades]
    paired = samples_a.select(columns).join(samples_b.select(columns), on="sample_id", suffix="_b",
                                            maintain_order="left")
    moved = paired.filter(pl.col("setting") != pl.col("setting_b"))
    if moved.height:
        raise GradingError(f"{moved.height} samples have different settings in A and B, e.g. "
                           f"{moved.row(0, named=True)['sample_id']!r}; are these runs of the same benchmark?")
    return paired.drop("setting_b")


def _check_table(name: str, frame: pl.DataFrame, grades: list[str]) -> None:
    missing = [c for c in ("sample_id", "setting", *grades) if c not in frame.columns]
    if missing:
        raise GradingError(f"samples of run {name} lack columns {missing}; pass a graded samples.parquet "
                           "(re-grade an old run with toolsweep-grade RUN_DIR)")
    if frame.height == 0:
        raise GradingError(f"samples of run {name} are empty: there is nothing to compare")
    dupes = frame["sample_id"].filter(frame["sample_id"].is_duplicated()).unique().sort().to_list()
    if dupes:
        raise GradingError(f"samples of run {name} repeat sample_ids {dupes[:_LISTED_IDS]}; "
                           "each sample must appear once")



def _compare_cell(paired: pl.DataFrame, setting: str, parser: str, metric: Metric) -> tuple:
    if not metric.per_sample:
        return _compare_pooled(paired, setting, parser, metric)
    column = f"{parser}_{metric.sources[0]}"
    # Metrics a benchmark defines for some samples only (an argument group) pair those samples.
    both = paired.filter(pl.col(column).is_not_null() & pl.col(f"{column}_b").is_not_null())
    a = both[column].cast(pl.Float64).to_numpy()
    b = both[f"{column}_b"].cast(pl.Float64).to_numpy()
    if a.size == 0:
        return (setting, parser, metric.name, 0, None, None, None, None, None, 0, 0, None)
    # A sample counts for the run that scored it higher; for 0/1 grades this is McNemar's
    # discordant pairs, for fractional scores the exact test is the sign test.
    a_only, b_only = int(np.sum(a > b)), int(np.sum(b > a))
    acc_a, acc_b = float(a.mean()), float(b.mean())
    low, high = paired_bootstrap_ci(a, b)
    return (setting, parser, metric.name, a.size, acc_a, acc_b, acc_b - acc_a, low, high,
            a_only, b_only, mcnemar_exact(b_only, a_only))


def _compare_pooled(paired: pl.DataFrame, setting: str, parser: str, metric: Metric,
                    n_resamples: int = 2000, seed: int = 0) -> tuple:
    # A pooled metric (F1 over counts) has no per-sample grade to test: the difference gets a
    # paired bootstrap CI (the same resampled samples for both runs) and no McNemar p-value.
    arrays_a = source_arrays(paired, parser, metric.sources)
    arrays_b = [paired[f"{parser}_{s}_b"].cast(pl.Float64).fill_null(np.nan).to_numpy() for s in metric.sources]
    value_a, value_b = metric.reduce(*arrays_a), metric.reduce(*arrays_b)
    if value_a is None or value_b is None or paired.height == 0:
        return (setting, parser, metric.name, paired.height, value_a, value_b, None, None, None, None, None, None)
    rng, diffs = np.random.default_rng(seed), []
    for _ in range(n_resamples):
        pick = rng.integers(0, paired.height, paired.height)
        a, b = metric.reduce(*(x[pick] for x in arrays_a)), metric.reduce(*(x[pick] for x in arrays_b))
        if a is not None and b is not None:
            diffs.append(b - a)
    low, high = np.quantile(diffs, [0.025, 0.975]) if diffs else (None, None)
    return (setting, parser, metric.name, paired.height, value_a, value_b, value_b - value_a,
            None if low is None else float(low), None if high is None else float(high), None, None, None)


def _flips(paired: pl.DataFrame, scorer: Scorer) -> pl.DataFrame:
    frames = [_flips_of(paired, parser, metric) for parser in scorer.readings for metric in scorer.metrics
              if metric.per_sample]
    return pl.concat(frames).cast(FLIP_SCHEMA) if frames else pl.DataFrame(schema=FLIP_SCHEMA)


def _flips_of(paired: pl.DataFrame, parser: str, metric: Metric) -> pl.DataFrame:
    column = f"{parser}_{metric.sources[0]}"
    a, b = pl.col(column).cast(pl.Float64), pl.col(f"{column}_b").cast(pl.Float64)
    return paired.filter(a != b).select(
        "sample_id", "setting", pl.lit(parser).alias("parser"), pl.lit(metric.name).alias("metric"),
        pl.when(b > a).then(pl.lit("gained")).otherwise(pl.lit("lost")).alias("direction"))


def format_comparison(comparison: pl.DataFrame, scorer: Scorer) -> str:
    """A Markdown table of the comparison, each metric on its own scale (shares in percent)."""
    return markdown_table(*comparison_cells(comparison, scorer))


def write_comparison(comparison: pl.DataFrame, flips: pl.DataFrame, out_dir: Path,
                     run_a: Path, run_b: Path) -> list[Path]:
    """comparison.parquet and flips.parquet in `out_dir`, naming both runs in the metadata, and
    report.html (the table and the most instructive flips with both outputs)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"toolsweep_compare": {"run_a": str(run_a), "run_b": str(run_b)}}
    return [write_table(comparison, out_dir / "comparison.parquet", COMPARISON_SCHEMA, meta),
            write_table(flips, out_dir / "flips.parquet", FLIP_SCHEMA, meta),
            write_compare_report(comparison, flips, out_dir, run_a, run_b)]


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
    print(format_comparison(comparison, scorer_of(samples_a)))
    print(f"\n{flips.height} flips; wrote " + ", ".join(str(p) for p in paths))
    return 0


def _default_out(run_a: Path, run_b: Path) -> Path:
    # A samples.parquet path names its run by the folder around it.
    name_a = (run_a.parent if run_a.suffix == ".parquet" else run_a).resolve().name
    base_b = run_b.parent if run_b.suffix == ".parquet" else run_b
    return base_b / f"compare_vs_{name_a}"


if __name__ == "__main__":
    sys.exit(main())
