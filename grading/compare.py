"""`toolsweep compare RUN_A RUN_B`: is run B better than run A on the same samples, or is it noise?

Samples are paired by sample_id (by record, each grade averaged over its samples, where a run
has several per record: decoding.samples), so each difference comes with a paired bootstrap 95% CI and
an exact McNemar p-value, and every sample that flipped between the runs is listed. "Better"
is each metric's declared direction (`Metric.higher_is_better`): fewer nudges is a gain; a
metric with no direction (mean turns) only goes higher or lower.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Collection

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.files import run_folder, run_name, samples_file
from grading.html_report import write_compare_report
from grading.listing import list_first
from grading.metrics import report_groups
from grading.repeats import record_level
from grading.report import markdown_table, write_table
from grading.scoring import Metric, Scorer, change_word, grade_columns, scorer_of, source_arrays, subsets_of
from grading.stats import mcnemar_exact, paired_bootstrap_ci, resampled_ci
from grading.tables import comparison_cells
from grading.views import AblationAxis, ablation_axis, counterfactual

COMPARISON_SCHEMA: dict[str, pl.DataType] = {
    "setting": pl.String, "parser": pl.String, "metric": pl.String, "n": pl.Int64,
    "acc_a": pl.Float64, "acc_b": pl.Float64, "diff": pl.Float64,
    "ci_low": pl.Float64, "ci_high": pl.Float64,
    # a_only / b_only: samples on which that run did better (the metric's direction; with no
    # direction, scored higher); verdict: better / worse (higher / lower with no direction) where
    # the 95% CI of diff excludes 0, else null.
    "a_only": pl.Int64, "b_only": pl.Int64, "p_value": pl.Float64, "verdict": pl.String,
}
FLIP_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String, "setting": pl.String, "parser": pl.String, "metric": pl.String,
    "direction": pl.String,
}
MOVES_SCHEMA: dict[str, pl.DataType] = {
    "setting": pl.String, "parser": pl.String, "n": pl.Int64, "a_right": pl.Int64, "moved": pl.Int64,
    "stayed": pl.Int64, "moved_share": pl.Float64,
}
"""A baseline run against its counterfactual twin (a value of the scorer's ablation axis that changes
the gold, grading.views.AblationAxis.counterfactual): per setting and reading, of the n samples in
both, a_right answered A's gold, moved answered A's gold in A and B's (changed) gold in B, stayed
answered A's gold in B too; moved_share = moved / a_right."""
# How many unmatched ids an error message lists per side; the counts are always given.
_LISTED_IDS = 20


def compare_runs(samples_a: pl.DataFrame, samples_b: pl.DataFrame, readings: Collection[str] | None = None,
                 metrics: Collection[str] | None = None, flips: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Paired comparison of two graded sample tables, and the samples that flipped.

    Returns (comparison, flips): comparison has one row per setting (and pooled "all") x
    parser x metric with acc_a, acc_b, diff = b - a, its paired bootstrap 95% CI, the
    discordant counts a_only / b_only, the exact McNemar p-value and the verdict; flips has one
    row per sample x parser x metric whose grade differs, "gained" when B did better on it as
    the metric's direction says ("lost" when worse; "higher" / "lower" for a metric with no
    direction). The metrics are the runs' scorer's, on each setting and each of its subsets
    (`{setting}/{subset}`: the samples in it in both runs); per-sample metrics get McNemar's
    test and flips, pooled ones (F1) a paired bootstrap CI only. A metric undefined in both
    runs (no sample it applies to) gets no row. `readings` and `metrics` narrow the comparison to
    those (each cell is computed on its own, so the rows kept are those of the whole comparison);
    `flips=False` leaves the flips empty.
    """
    for name, frame in (("A", samples_a), ("B", samples_b)):
        if frame.height == 0:
            raise GradingError(f"samples of run {name} are empty: there is nothing to compare")
    scorer = _same_scorer(samples_a, samples_b)
    _check_unique("A", samples_a)
    _check_unique("B", samples_b)
    samples_a, samples_b = _counterfactual_pairs(record_level(samples_a, scorer), record_level(samples_b, scorer),
                                                 ablation_axis(scorer))
    paired = _pair(samples_a, samples_b, scorer)
    parsers = [p for p in scorer.readings if readings is None or p in readings]
    chosen = [m for m in scorer.metrics if metrics is None or m.name in metrics]
    rows = [_compare_cell(frame, label, p, m)
            for label, frame in report_groups(paired, scorer) for p in parsers for m in chosen]
    defined = (pl.col("n") > 0) & (pl.col("acc_a").is_not_null() | pl.col("acc_b").is_not_null())
    comparison = pl.DataFrame(rows, schema=COMPARISON_SCHEMA, orient="row").filter(defined)
    return comparison, _flips(paired, scorer) if flips else pl.DataFrame(schema=FLIP_SCHEMA)


def _counterfactual_pairs(samples_a: pl.DataFrame, samples_b: pl.DataFrame,
                          axis: AblationAxis | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A counterfactual run leaves out samples with no counterfactual: its twin is compared on the
    samples both hold (saying how many it drops); any other pair is compared as it is."""
    if counterfactual(samples_a, axis) == counterfactual(samples_b, axis):
        return samples_a, samples_b
    common = set(samples_a["sample_id"]) & set(samples_b["sample_id"])
    dropped = samples_a.height + samples_b.height - 2 * len(common)
    if dropped:
        print(f"toolsweep compare: one run is a counterfactual {axis.option} run; comparing the {len(common)} samples "
              f"both hold ({dropped} without a counterfactual left out)", file=sys.stderr)
    keep = pl.col("sample_id").is_in(list(common))
    return samples_a.filter(keep), samples_b.filter(keep)


def counterfactual_moves(samples_a: pl.DataFrame, samples_b: pl.DataFrame, readings: tuple[str, ...]) -> pl.DataFrame:
    """How often B's answer moved with its counterfactual change (B is the counterfactual run of
    the scorer's ablation axis); empty unless exactly B is one."""
    axis = ablation_axis(scorer_of(samples_a))
    if not counterfactual(samples_b, axis) or counterfactual(samples_a, axis):
        return pl.DataFrame(schema=MOVES_SCHEMA)
    rows = []
    for parser in readings:
        tool = f"{parser}_tool"
        pairs = samples_a.select("sample_id", "setting", pl.col(tool).alias("a"), pl.col("gold_tool").alias("a_gold")).join(
            samples_b.select("sample_id", pl.col(tool).alias("b"), pl.col("gold_tool").alias("b_gold")), on="sample_id")
        for setting, group in [*pairs.group_by("setting", maintain_order=True), (("all",), pairs)]:
            right = group["a"] == group["a_gold"]
            moved = int((right & (group["b"] == group["b_gold"])).sum())
            a_right = int(right.sum())
            rows.append((setting[0], parser, group.height, a_right, moved, int((group["b"] == group["a_gold"]).sum()),
                         moved / a_right if a_right else None))
    return pl.DataFrame(rows, schema=MOVES_SCHEMA, orient="row")


def _same_scorer(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> Scorer:
    scorer_a, scorer_b = scorer_of(samples_a), scorer_of(samples_b)
    if scorer_a.name != scorer_b.name:
        raise GradingError(f"run A is scored by {scorer_a.name!r} and run B by {scorer_b.name!r}; "
                           "compare runs of the same benchmark")
    return scorer_a


def _pair(samples_a: pl.DataFrame, samples_b: pl.DataFrame, scorer: Scorer) -> pl.DataFrame:
    grades = list(grade_columns(scorer))
    marks = list(dict.fromkeys(subsets_of(scorer).values()))
    for name, frame in (("A", samples_a), ("B", samples_b)):
        _check_table(name, frame, [*marks, *grades])
    ids_a, ids_b = set(samples_a["sample_id"]), set(samples_b["sample_id"])
    if ids_a != ids_b and (ids_a < ids_b or ids_b < ids_a):
        # one run's samples inside the other's (a racing sweep's stopped job, a dataset.subsample or
        # a smaller dataset.limit): paired on the samples both hold, said
        common = ids_a & ids_b
        print(f"toolsweep compare: run {'A' if len(ids_a) < len(ids_b) else 'B'} holds {len(common)} of the other's "
              f"{max(len(ids_a), len(ids_b))} samples; comparing those {len(common)}", file=sys.stderr)
        samples_a = samples_a.filter(pl.col("sample_id").is_in(list(common)))
        samples_b = samples_b.filter(pl.col("sample_id").is_in(list(common)))
        ids_a = ids_b = common
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise GradingError(
            f"runs A and B graded different samples: {len(only_a)} only in A [{_ids(only_a)}], "
            f"{len(only_b)} only in B [{_ids(only_b)}]; compare runs of the same dataset.path, "
            "dataset.settings and dataset.limit")
    columns = ["sample_id", "setting", *dict.fromkeys([*marks, *grades])]  # a subset may name a grade column
    paired = samples_a.select(columns).join(samples_b.select(columns), on="sample_id", suffix="_b",
                                            maintain_order="left")
    moved = paired.filter(pl.col("setting") != pl.col("setting_b"))
    if moved.height:
        raise GradingError(f"{moved.height} samples have different settings in A and B, e.g. "
                           f"{moved.row(0, named=True)['sample_id']!r}; are these runs of the same benchmark?")
    # A subset compares the samples both runs put in it (a data fix between runs can move a case).
    both = [(pl.col(c) & pl.col(f"{c}_b")).alias(c) for c in marks]
    return paired.with_columns(both).drop("setting_b", *(f"{c}_b" for c in marks))


def _ids(ids: list[str]) -> str:
    return list_first([repr(i) for i in ids], _LISTED_IDS)


def _check_table(name: str, frame: pl.DataFrame, grades: list[str]) -> None:
    missing = [c for c in ("sample_id", "setting", *grades) if c not in frame.columns]
    if missing:
        raise GradingError(f"samples of run {name} lack columns {missing}; pass a graded samples.parquet "
                           "(re-grade an old run with toolsweep grade RUN_DIR)")
    if frame.height == 0:
        raise GradingError(f"samples of run {name} are empty: there is nothing to compare")


def _check_unique(name: str, frame: pl.DataFrame) -> None:
    if "sample_id" not in frame.columns:
        return  # _check_table names the missing columns
    dupes = frame["sample_id"].filter(frame["sample_id"].is_duplicated()).unique().sort().to_list()
    if dupes:
        raise GradingError(f"samples of run {name} repeat sample_ids [{_ids(dupes)}]; "
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
        return (setting, parser, metric.name, 0, None, None, None, None, None, 0, 0, None, None)
    # A sample counts for the run that did better on it (lower, for a lower-is-better metric);
    # for 0/1 grades these are McNemar's discordant pairs, for fractional scores the exact test
    # is the sign test. Either way the p-value is symmetric in the two counts.
    up = -1.0 if metric.higher_is_better is False else 1.0
    a_only, b_only = int(np.sum(up * a > up * b)), int(np.sum(up * b > up * a))
    acc_a, acc_b = float(a.mean()), float(b.mean())
    low, high = paired_bootstrap_ci(a, b)
    return (setting, parser, metric.name, a.size, acc_a, acc_b, acc_b - acc_a, low, high,
            a_only, b_only, mcnemar_exact(b_only, a_only), verdict(metric, low, high))


def verdict(metric: Metric, low: float | None, high: float | None) -> str | None:
    """`better` / `worse` for B where the CI of B - A excludes 0 (`higher` / `lower` for a metric
    with no direction); None where it includes 0 or there is none."""
    if low is None or high is None or np.isnan(low) or np.isnan(high) or low <= 0 <= high:
        return None
    return change_word(metric, low > 0)


def _compare_pooled(paired: pl.DataFrame, setting: str, parser: str, metric: Metric,
                    n_resamples: int = 2000, seed: int = 0) -> tuple:
    # A pooled metric (F1 over counts) has no per-sample grade to test: the difference gets a
    # paired bootstrap CI (the same resampled samples for both runs) and no McNemar p-value.
    arrays_a = source_arrays(paired, parser, metric.sources)
    arrays_b = [paired[f"{parser}_{s}_b"].cast(pl.Float64).fill_null(np.nan).to_numpy() for s in metric.sources]
    value_a, value_b = metric.reduce(*arrays_a), metric.reduce(*arrays_b)
    if value_a is None or value_b is None or paired.height == 0:
        return (setting, parser, metric.name, paired.height, value_a, value_b, None, None, None, None, None, None,
                None)

    def diff(pick: np.ndarray) -> float | None:
        a, b = metric.reduce(*(x[pick] for x in arrays_a)), metric.reduce(*(x[pick] for x in arrays_b))
        return None if a is None or b is None else b - a

    low, high = (None if np.isnan(v) else v for v in resampled_ci(diff, paired.height, n_resamples, seed))
    return (setting, parser, metric.name, paired.height, value_a, value_b, value_b - value_a, low, high,
            None, None, None, verdict(metric, low, high))


def _flips(paired: pl.DataFrame, scorer: Scorer) -> pl.DataFrame:
    frames = [_flips_of(paired, parser, metric) for parser in scorer.readings for metric in scorer.metrics
              if metric.per_sample]
    return pl.concat(frames).cast(FLIP_SCHEMA) if frames else pl.DataFrame(schema=FLIP_SCHEMA)


def _flips_of(paired: pl.DataFrame, parser: str, metric: Metric) -> pl.DataFrame:
    column = f"{parser}_{metric.sources[0]}"
    a, b = pl.col(column).cast(pl.Float64), pl.col(f"{column}_b").cast(pl.Float64)
    up, down = change_word(metric, True, "gained", "lost"), change_word(metric, False, "gained", "lost")
    return paired.filter(a != b).select(
        "sample_id", "setting", pl.lit(parser).alias("parser"), pl.lit(metric.name).alias("metric"),
        pl.when(b > a).then(pl.lit(up)).otherwise(pl.lit(down)).alias("direction"))


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


def build_parser(prog: str = "toolsweep-compare") -> argparse.ArgumentParser:
    """The parser of `toolsweep compare`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path, help="baseline run dir (or sweep job dir)")
    parser.add_argument("run_b", type=Path, help="run dir compared against RUN_A")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: RUN_B/compare_vs_<name of RUN_A>)")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-compare") -> int:
    """Console entry point: compare two runs, write the tables, print the Markdown table."""
    args = build_parser(prog).parse_args(argv)
    try:
        samples_a = pl.read_parquet(samples_file(args.run_a))
        samples_b = pl.read_parquet(samples_file(args.run_b))
        comparison, flips = compare_runs(samples_a, samples_b)
        out = args.out or _default_out(args.run_a, args.run_b)
        paths = write_comparison(comparison, flips, out, args.run_a, args.run_b)
        moves = counterfactual_moves(samples_a, samples_b, scorer_of(samples_a).readings)
    except GradingError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    print(format_comparison(comparison, scorer_of(samples_a)))
    if moves.height:
        axis = ablation_axis(scorer_of(samples_a))
        paths.append(write_table(moves, out / f"{axis.name}_moves.parquet", MOVES_SCHEMA, {}))
        cells = [[str(v) if not isinstance(v, float) else f"{v:.1%}" for v in r] for r in moves.rows()]
        print(f"\nAnswers that moved with the counterfactual {axis.option} (B), of those right in A:\n"
              + markdown_table(list(moves.columns), cells))
    print(f"\n{flips.height} flips; wrote " + ", ".join(str(p) for p in paths))
    return 0


def _default_out(run_a: Path, run_b: Path) -> Path:
    return run_folder(run_b) / f"compare_vs_{run_name(run_a)}"


if __name__ == "__main__":
    sys.exit(main())
