"""`toolsweep agreement RUN_OR_SWEEP_A RUN_OR_SWEEP_B`: do two judges score the same trajectories alike?

The two runs (or sweeps) hold the same agent output judged by two judges (e.g. a sweep over
`roles.<judge role>.model.path=A,B`, or `toolsweep judge` with another judge). What is compared is
what the runs' scorer declares in its judge view (grading.views.JudgeView): the judge's role, its
dimensions (sample columns) and their scale, and its per key point scores. Per judge dimension:
quadratic-weighted Cohen's kappa (computed here, equal to scikit-learn's), Krippendorff's alpha,
ordinal (`krippendorff`), exact and within-1 agreement and the mean difference (B - A), each with a bootstrap 95% CI over
cases; per key point, the agreement of the 0/1/2 scores. Given two sweeps, job i of A is paired
with job i of B (the same checkpoints in the same order) and the checkpoints' rankings by each
judge are compared with Kendall's tau (scipy), listing every pair whose order flips.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.files import read_facts, run_folder, samples_file
from grading.report import markdown_table, write_table
from grading.scoring import scorer_of
from grading.stats import resampled_ci
from grading.sweep import job_dirs
from grading.views import JudgeView, judge_model, judge_view

FAMILIES = ("llama", "qwen", "mistral", "mixtral", "gemma", "smollm", "phi", "deepseek", "granite", "olmo", "yi")
AGREEMENT_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "n": pl.Int64,
    **{f"{name}{end}": pl.Float64 for name in ("kappa", "alpha", "exact", "within_1", "mean_diff")
       for end in ("", "_low", "_high")},
}
RANKING_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String, "jobs": pl.Int64, "tau": pl.Float64, "p_value": pl.Float64, "flips": pl.String,
}


def view_of_runs(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> JudgeView:
    """The judge view of the scorer both runs name; an error where they differ or it declares none."""
    scorer_a, scorer_b = scorer_of(samples_a), scorer_of(samples_b)
    if scorer_a.name != scorer_b.name:
        raise GradingError(f"run A is graded by {scorer_a.name!r} and run B by {scorer_b.name!r}: pass two runs of "
                           "one benchmark judged by two judges")
    view = judge_view(scorer_a)
    if view is None:
        raise GradingError(f"scorer {scorer_a.name!r} declares no judge view (no judge model scores its samples): "
                           "pass runs of a benchmark whose scorer declares one (RowScorer(judge_view=...))")
    return view


def judged_pairs(samples_a: pl.DataFrame, samples_b: pl.DataFrame, view: JudgeView) -> pl.DataFrame:
    """The cases both judges scored (every dimension), one row each, A's and B's columns."""
    columns = ["sample_id", *([view.points] if view.points else []), *view.dimensions.values()]
    for name, frame in (("A", samples_a), ("B", samples_b)):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise GradingError(f"samples of run {name} lack {missing}, the columns its scorer's judge view names: "
                               "was the run judged? (toolsweep judge RUN_DIR)")
    paired = samples_a.select(columns).join(samples_b.select(columns), on="sample_id", suffix="_b")
    if paired.height == 0:
        raise GradingError(f"runs A and B share no sample: judge the same agent run twice (toolsweep judge RUN_DIR "
                           f"roles.{view.role}.model.path=...) or sweep roles.{view.role}.model.path=A,B")
    scored = [pl.col(f"{c}{s}").is_not_null() for c in view.dimensions.values() for s in ("", "_b")]
    return paired.filter(pl.all_horizontal(scored))


def agreement(a: np.ndarray, b: np.ndarray, levels: Sequence[int], scope: str, seed: int = 0) -> dict[str, Any]:
    """Every statistic for one pair of score vectors, with bootstrap CIs over their rows."""
    row: dict[str, Any] = {"scope": scope, "n": int(a.size)}
    for name, statistic in _statistics(levels).items():
        value = statistic(a, b) if a.size else math.nan
        low, high = resampled_ci(lambda pick: statistic(a[pick], b[pick]), int(a.size), 1000, seed)
        row.update({name: value, f"{name}_low": low, f"{name}_high": high})
    return row


def _statistics(levels: Sequence[int]) -> dict[str, Callable[[np.ndarray, np.ndarray], float]]:
    return {"kappa": lambda a, b: _kappa(a, b, levels), "alpha": lambda a, b: _alpha(a, b, levels),
            "exact": lambda a, b: float(np.mean(a == b)), "within_1": lambda a, b: float(np.mean(np.abs(a - b) <= 1)),
            "mean_diff": lambda a, b: float(np.mean(b - a))}


def _kappa(a: np.ndarray, b: np.ndarray, levels: Sequence[int]) -> float:
    """Cohen's kappa with quadratic weights over the ordered `levels`: 1 - sum(w * observed) /
    sum(w * expected), w = squared distance between levels, expected from the two marginals."""
    if len(set(a.tolist()) | set(b.tolist())) < 2:
        return math.nan  # one value everywhere: kappa is undefined (0/0)
    index = {level: i for i, level in enumerate(levels)}
    observed = np.zeros((len(levels), len(levels)))
    np.add.at(observed, ([index[v] for v in a.tolist()], [index[v] for v in b.tolist()]), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    places = np.arange(len(levels), dtype=np.float64)
    weights = (places[:, None] - places[None, :]) ** 2
    return float(1.0 - (weights * observed).sum() / (weights * expected).sum())


def _alpha(a: np.ndarray, b: np.ndarray, levels: Sequence[int]) -> float:
    import krippendorff

    if len(set(a.tolist()) | set(b.tolist())) < 2:
        return math.nan  # no variation to agree on
    return float(krippendorff.alpha(reliability_data=np.vstack([a, b]).astype(float), value_domain=list(levels),
                                    level_of_measurement="ordinal"))


def point_scores(paired: pl.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Both judges' scores of every key point they both scored (JSON {group: {point: score}} in
    `column`), in case order."""
    a, b = [], []
    for left, right in paired.select(column, f"{column}_b").iter_rows():
        points_a, points_b = json.loads(left or "{}"), json.loads(right or "{}")
        for group, scores in points_a.items():
            for point, score in scores.items():
                other = (points_b.get(group) or {}).get(point)
                if score is not None and other is not None:
                    a.append(score)
                    b.append(other)
    return np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)


def agreement_table(samples_a: pl.DataFrame, samples_b: pl.DataFrame, view: JudgeView | None = None) -> pl.DataFrame:
    """One row per dimension of the scorer's judge view (found from the runs where not given) and,
    where it scores key points, one for them."""
    view = view_of_runs(samples_a, samples_b) if view is None else view
    paired = judged_pairs(samples_a, samples_b, view)
    rows = [agreement(paired[c].to_numpy(), paired[f"{c}_b"].to_numpy(), view.scale, d)
            for d, c in view.dimensions.items()]
    if view.points:
        rows.append(agreement(*point_scores(paired, view.points), view.point_scale, "keypoints"))
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def ranking(means_a: Sequence[float], means_b: Sequence[float], labels: Sequence[str],
            headline: str) -> dict[str, Any]:
    """Kendall's tau between two judges' rankings of the same checkpoints, and each flipped pair."""
    from scipy.stats import kendalltau

    result = kendalltau(means_a, means_b)
    flips = [(labels[i], labels[j]) for i in range(len(labels)) for j in range(i + 1, len(labels))
             if (means_a[i] - means_a[j]) * (means_b[i] - means_b[j]) < 0]
    return {"metric": headline, "jobs": len(labels), "tau": float(result.statistic), "p_value": float(result.pvalue),
            "flips": json.dumps(flips)}


def family_warnings(facts_a: dict[str, Any], facts_b: dict[str, Any], view: JudgeView) -> list[str]:
    """A line for each judge that shares a model family with the evaluated model."""
    lines = []
    for name, facts in (("A", facts_a), ("B", facts_b)):
        agent = str(((facts.get("model") or {}).get("name")) or "").lower()
        judge = str(judge_model(view, facts) or "").lower()
        shared = [f for f in FAMILIES if f in agent and f in judge]
        if shared:
            lines.append(f"warning: run {name}'s judge ({judge}) and the evaluated model ({agent}) are both {shared[0]}: "
                         "a judge may favour its own family's answers")
    return lines


def _runs(path: Path) -> list[Path]:
    jobs = [p for _, p in job_dirs(path)]
    return jobs or [run_folder(path)]


def compare_judges(path_a: Path, path_b: Path) -> tuple[pl.DataFrame, pl.DataFrame | None, list[str]]:
    """(agreement over every paired case, the ranking comparison for sweeps, warnings)."""
    runs_a, runs_b = _runs(path_a), _runs(path_b)
    if len(runs_a) != len(runs_b):
        raise GradingError(f"{path_a} has {len(runs_a)} runs and {path_b} {len(runs_b)}: pass two runs, or two "
                           "sweeps over the same checkpoints in the same order")
    samples_a = [pl.read_parquet(samples_file(r)) for r in runs_a]
    samples_b = [pl.read_parquet(samples_file(r)) for r in runs_b]
    keyed = [s.with_columns((pl.lit(f"{i}:") + pl.col("sample_id")).alias("sample_id"))
             for group in (samples_a, samples_b) for i, s in enumerate(group)]
    pooled_a = pl.concat(keyed[:len(runs_a)], how="diagonal_relaxed")
    pooled_b = pl.concat(keyed[len(runs_a):], how="diagonal_relaxed")
    view = view_of_runs(pooled_a, pooled_b)  # every job of both under one scorer
    table = agreement_table(pooled_a, pooled_b, view)
    ranked = None
    if len(runs_a) > 1:
        column = view.dimensions[view.headline]
        ranked = pl.DataFrame([ranking([s[column].mean() for s in samples_a], [s[column].mean() for s in samples_b],
                                       [r.name for r in runs_a], view.headline)], schema=RANKING_SCHEMA)
    warnings = [w for a, b in zip(runs_a, runs_b) for w in family_warnings(read_facts(a / "run.json"),
                                                                           read_facts(b / "run.json"), view)]
    return table, ranked, list(dict.fromkeys(warnings))


def agreement_cells(table: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The agreement table's header and rows as text, each statistic with its CI."""
    def cell(row: dict[str, Any], name: str) -> str:
        value, low, high = row[name], row[f"{name}_low"], row[f"{name}_high"]
        return "n/a" if value is None or math.isnan(value) else f"{value:.3f} [{low:.3f}, {high:.3f}]"

    names = ("kappa", "alpha", "exact", "within_1", "mean_diff")
    rows = [[r["scope"], str(r["n"]), *(cell(r, n) for n in names)] for r in table.iter_rows(named=True)]
    return ["scope", "n", "kappa (quadratic)", "alpha (ordinal)", "exact", "within 1", "mean diff B-A"], rows


def format_agreement(table: pl.DataFrame) -> str:
    """The agreement table in Markdown."""
    return markdown_table(*agreement_cells(table))


def build_parser(prog: str = "toolsweep-agreement") -> argparse.ArgumentParser:
    """The parser of `toolsweep agreement`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="run or sweep judged by judge A")
    parser.add_argument("b", type=Path, help="the same trajectories judged by judge B")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: B/agreement_vs_<A's name>)")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-agreement") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        table, ranked, warnings = compare_judges(args.a, args.b)
    except GradingError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    out = args.out or (args.b / f"agreement_vs_{args.a.resolve().name}")
    out.mkdir(parents=True, exist_ok=True)
    meta = {"toolsweep_agreement": {"a": str(args.a), "b": str(args.b)}}
    paths = [write_table(table, out / "agreement.parquet", AGREEMENT_SCHEMA, meta)]
    if ranked is not None:
        paths.append(write_table(ranked, out / "ranking.parquet", RANKING_SCHEMA, meta))
    from grading.html_report import write_agreement_report

    paths.append(write_agreement_report(agreement_cells(table), ranked, warnings, out, args.a, args.b))
    for line in warnings:
        print(line, file=sys.stderr)
    print(format_agreement(table))
    if ranked is not None:
        row = ranked.row(0, named=True)
        print(f"\nKendall's tau of the {row['jobs']} checkpoints' {row['metric']} ranking: {row['tau']:.3f} "
              f"(p {row['p_value']:.3f}); flipped pairs: {row['flips']}")
    print("\nwrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
