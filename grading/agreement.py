"""`toolsweep agreement RUN_OR_SWEEP_A RUN_OR_SWEEP_B`: do two judges score the same trajectories alike?

The two runs (or sweeps) hold the same agent trajectories judged by two judges (e.g. a sweep
over `roles.judge.model.path=A,B`, or `toolsweep judge` with another judge). Per judge dimension:
quadratic-weighted Cohen's kappa (scikit-learn), Krippendorff's alpha, ordinal (`krippendorff`),
exact and within-1 agreement and the mean difference (B - A), each with a bootstrap 95% CI over
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
from grading.scorers.etapp_judge import DIMENSIONS
from grading.stats import resampled_ci
from grading.sweep import job_dirs

SCORES = tuple(range(6))
POINT_SCORES = (0, 1, 2)
HEADLINE = "personalization"
"""The dimension the checkpoints are ranked by (the scorer's headline)."""
FAMILIES = ("llama", "qwen", "mistral", "mixtral", "gemma", "smollm", "phi", "deepseek", "granite", "olmo", "yi")
AGREEMENT_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "n": pl.Int64,
    **{f"{name}{end}": pl.Float64 for name in ("kappa", "alpha", "exact", "within_1", "mean_diff")
       for end in ("", "_low", "_high")},
}
RANKING_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String, "jobs": pl.Int64, "tau": pl.Float64, "p_value": pl.Float64, "flips": pl.String,
}


def judged_pairs(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> pl.DataFrame:
    """The cases both judges scored (every dimension), one row each, A's and B's columns."""
    columns = ["sample_id", "judge_keypoints", *(f"judge_{d}" for d in DIMENSIONS)]
    for name, frame in (("A", samples_a), ("B", samples_b)):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise GradingError(f"samples of run {name} lack {missing}: pass runs of a judged benchmark (ETAPP)")
    paired = samples_a.select(columns).join(samples_b.select(columns), on="sample_id", suffix="_b")
    if paired.height == 0:
        raise GradingError("runs A and B share no sample: judge the same agent run twice (toolsweep judge RUN_DIR "
                           "roles.judge.model.path=...) or sweep roles.judge.model.path=A,B")
    scored = [pl.col(f"judge_{d}{s}").is_not_null() for d in DIMENSIONS for s in ("", "_b")]
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


def point_scores(paired: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Both judges' 0/1/2 scores of every key point they both scored, in case order."""
    a, b = [], []
    for left, right in paired.select("judge_keypoints", "judge_keypoints_b").iter_rows():
        points_a, points_b = json.loads(left or "{}"), json.loads(right or "{}")
        for group, scores in points_a.items():
            for point, score in scores.items():
                other = (points_b.get(group) or {}).get(point)
                if score is not None and other is not None:
                    a.append(score)
                    b.append(other)
    return np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)


def agreement_table(samples_a: pl.DataFrame, samples_b: pl.DataFrame) -> pl.DataFrame:
    """One row per dimension and one for the key points."""
    paired = judged_pairs(samples_a, samples_b)
    rows = [agreement(paired[f"judge_{d}"].to_numpy(), paired[f"judge_{d}_b"].to_numpy(), SCORES, d)
            for d in DIMENSIONS]
    rows.append(agreement(*point_scores(paired), POINT_SCORES, "keypoints"))
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def ranking(means_a: Sequence[float], means_b: Sequence[float], labels: Sequence[str]) -> dict[str, Any]:
    """Kendall's tau between two judges' rankings of the same checkpoints, and each flipped pair."""
    from scipy.stats import kendalltau

    result = kendalltau(means_a, means_b)
    flips = [(labels[i], labels[j]) for i in range(len(labels)) for j in range(i + 1, len(labels))
             if (means_a[i] - means_a[j]) * (means_b[i] - means_b[j]) < 0]
    return {"metric": HEADLINE, "jobs": len(labels), "tau": float(result.statistic), "p_value": float(result.pvalue),
            "flips": json.dumps(flips)}


def family_warnings(facts_a: dict[str, Any], facts_b: dict[str, Any]) -> list[str]:
    """A line for each judge that shares a model family with the evaluated model."""
    lines = []
    for name, facts in (("A", facts_a), ("B", facts_b)):
        agent = str(((facts.get("model") or {}).get("name")) or "").lower()
        judge = str(((((facts.get("roles") or {}).get("judge") or {}).get("model") or {}).get("name")) or "").lower()
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
    table = agreement_table(pl.concat(keyed[:len(runs_a)], how="diagonal_relaxed"),
                            pl.concat(keyed[len(runs_a):], how="diagonal_relaxed"))
    ranked = None
    if len(runs_a) > 1:
        column = f"judge_{HEADLINE}"
        ranked = pl.DataFrame([ranking([s[column].mean() for s in samples_a], [s[column].mean() for s in samples_b],
                                       [r.name for r in runs_a])], schema=RANKING_SCHEMA)
    warnings = [w for a, b in zip(runs_a, runs_b) for w in family_warnings(read_facts(a / "run.json"),
                                                                           read_facts(b / "run.json"))]
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


def main(argv: list[str] | None = None, prog: str = "toolsweep-agreement") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="run or sweep judged by judge A")
    parser.add_argument("b", type=Path, help="the same trajectories judged by judge B")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: B/agreement_vs_<A's name>)")
    args = parser.parse_args(argv)
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
        print(f"\nKendall's tau of the {row['jobs']} checkpoints' {HEADLINE} ranking: {row['tau']:.3f} "
              f"(p {row['p_value']:.3f}); flipped pairs: {row['flips']}")
    print("\nwrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
