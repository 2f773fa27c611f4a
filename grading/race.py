"""Racing checkpoints: score every candidate on growing nested subsets of the same samples and stop
those that are worse than the round's leader with confidence, at a stated error rate.

The statistics only (numpy; the sweeper in hydra_plugins/toolsweep_race runs the rounds):

- Rounds: sample counts growing geometrically from `first` to the whole set; the subsets are
  nested (inference.subsample orders samples once, seeded and stratified), so round r pairs every
  survivor with the leader on the same n_r samples.
- Test per survivor against the leader, one-sided, on the headline metric in its declared
  direction, H0: leader - other <= delta. Per-sample 0/1 grades: the exact sign (McNemar) test on
  the discordant pairs (delta = 0). Other per-sample scores (judge scores), or a margin: a paired
  sign-flip permutation test of (leader - other - delta). A pooled metric (F1 over counts): a
  paired bootstrap of the difference.
- Error control: Holm's step-down within a round at alpha_r, and alpha_r = alpha / R over the R
  planned rounds (Bonferroni spending), so the chance of stopping any candidate that is in truth
  no worse than delta below the best, over all jobs and rounds, is at most alpha. The leader is
  chosen on the same data, which only makes each test harder to reject for the one truly best.
- `keep` jobs are never stopped; survivors of the last round are scored on every sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.stats import resampled_statistics

DEFAULT_ALPHA = 0.05


MAX_ROUNDS = 20
"""The most rounds a race may plan: alpha is split over the planned rounds (alpha / R each), so a
long plan tests every round at a level so small that it stops nothing."""


def round_sizes(total: int, first: int = 100, growth: float = 2.0, max_rounds: int = MAX_ROUNDS) -> list[int]:
    """Sample counts per round: first, first*growth, ... and the whole set last (each at least the
    one before; a set no larger than `first` is one round). A plan that does not grow (growth <= 1),
    starts below one record, or takes more than `max_rounds` rounds is refused (GradingError)."""
    problems = []
    if not growth > 1:
        problems.append(f"hydra.sweeper.growth must be > 1 (each round larger than the one before), got {growth}: "
                        "e.g. hydra.sweeper.growth=2")
    if first < 1:
        problems.append(f"hydra.sweeper.first must be at least 1 record, got {first}: e.g. hydra.sweeper.first=100")
    if problems:
        raise GradingError("; ".join(problems))
    if total <= 0:
        return []
    sizes, size = [], int(first)
    while size < total:
        sizes.append(size)
        size = max(size + 1, int(math.ceil(size * growth)))
    sizes.append(total)
    if len(sizes) > max_rounds:
        raise GradingError(f"hydra.sweeper.first={first} and hydra.sweeper.growth={growth} plan {len(sizes)} rounds "
                           f"for {total} records, more than {max_rounds} (each round is tested at alpha / rounds): "
                           "raise hydra.sweeper.first or hydra.sweeper.growth")
    return sizes


def sign_test_p(better: int, worse: int) -> float:
    """One-sided exact p that the leader is better: P(X >= better) for X ~ Bin(better + worse, 1/2)."""
    n = better + worse
    if n == 0:
        return 1.0
    logf = _log_factorials(n)
    i = np.arange(better, n + 1)
    return float(min(1.0, np.exp(logf[n] - logf[i] - logf[n - i] - n * math.log(2)).sum()))


_LOGF = np.zeros(1)


def _log_factorials(n: int) -> np.ndarray:
    """log(k!) for k = 0..n (grown once, kept): the sign test's terms in log space, exact to float."""
    global _LOGF
    if _LOGF.size <= n:
        _LOGF = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, 2 * n + 2, dtype=np.float64)))])
    return _LOGF


def permutation_p(diff: np.ndarray, delta: float = 0.0, n_resamples: int = 4000, seed: int = 0) -> float:
    """One-sided paired sign-flip p for mean(diff) > delta (diff: leader minus other, per sample)."""
    centred = np.asarray(diff, dtype=np.float64) - delta
    if centred.size == 0:
        return 1.0
    observed = centred.mean()
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_resamples, centred.size))
    flipped = (signs * centred).mean(axis=1)
    return float((1 + np.sum(flipped >= observed - 1e-12)) / (n_resamples + 1))


def paired_p(leader: np.ndarray, other: np.ndarray, higher_is_better: bool, delta: float = 0.0,
             seed: int = 0) -> float:
    """One-sided p that `leader` beats `other` by more than `delta` on paired per-sample scores."""
    up = 1.0 if higher_is_better else -1.0
    diff = up * (np.asarray(leader, dtype=np.float64) - np.asarray(other, dtype=np.float64))
    binary = np.isin(leader, (0.0, 1.0)).all() and np.isin(other, (0.0, 1.0)).all()
    if binary and delta == 0:
        return sign_test_p(int(np.sum(diff > 0)), int(np.sum(diff < 0)))
    return permutation_p(diff, delta, seed=seed)


def bootstrap_p(leader: np.ndarray, other: np.ndarray, reduce: Callable[..., Optional[float]],
                higher_is_better: bool, delta: float = 0.0, n_resamples: int = 2000, seed: int = 0) -> float:
    """One-sided paired bootstrap p for a pooled metric (F1 over counts): samples are resampled
    with the same indices for both jobs, and p is the share of resamples in which the leader's
    lead is at most `delta`. `leader`, `other`: (samples, sources) arrays of the metric's sources."""
    n = leader.shape[0]
    if n == 0:
        return 1.0
    up = 1.0 if higher_is_better else -1.0

    def lead(idx: np.ndarray) -> Optional[float]:
        mine, theirs = reduce(*leader[idx].T), reduce(*other[idx].T)
        return None if mine is None or theirs is None else up * (mine - theirs)

    leads = resampled_statistics(lead, n, n_resamples, seed)
    # a resample where the metric is undefined for either job (nan) shows no lead
    behind = int(np.sum(np.isnan(leads) | (leads <= delta)))
    return float((1 + behind) / (n_resamples + 1))


def holm(pvalues: dict[str, float], alpha: float) -> set[str]:
    """The hypotheses Holm's step-down rejects at family-wise level alpha."""
    rejected: set[str] = set()
    ordered = sorted(pvalues.items(), key=lambda item: (item[1], item[0]))
    for rank, (name, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - rank):
            break
        rejected.add(name)
    return rejected


@dataclass
class Decision:
    """One survivor's test in a round."""

    job: str
    value: Optional[float]
    diff: Optional[float]
    """leader - job, in the metric's direction (positive: the leader is better)."""
    p: float
    stopped: bool


@dataclass
class Round:
    number: int
    size: int
    alpha: float
    leader: str
    values: dict[str, Optional[float]]
    decisions: list[Decision] = field(default_factory=list)


def decide_round(number: int, size: int, scores: dict[str, np.ndarray], higher_is_better: bool,
                 alpha: float, rounds: int, keep: Sequence[str] = (), delta: float = 0.0,
                 seed: int = 0, reduce: Optional[Callable[..., Optional[float]]] = None) -> Round:
    """Round `number`'s leader and stops. `scores`: each survivor's per-sample scores on the round's
    samples, aligned (nan where a sample has no score: left out pairwise); for a pooled metric,
    `reduce` is its aggregation and each job's scores are a (samples, sources) array of its
    per-sample sources (a paired bootstrap tests it)."""
    means = {job: _value(values, reduce) for job, values in scores.items()}
    direction = 1.0 if higher_is_better else -1.0
    ranked = [job for job in scores if means[job] is not None]
    leader = max(ranked, key=lambda job: (direction * means[job], -list(scores).index(job))) if ranked else next(iter(scores))
    level = alpha / max(rounds, 1)
    pvalues, diffs = {}, {}
    for job in scores:
        if job == leader or job in keep:
            continue
        if reduce is not None:
            pvalues[job] = bootstrap_p(scores[leader], scores[job], reduce, higher_is_better, delta, seed=seed)
            known = means[leader] is not None and means[job] is not None
            diffs[job] = float(direction * (means[leader] - means[job])) if known else None
            continue
        both = ~(np.isnan(scores[leader]) | np.isnan(scores[job]))
        pvalues[job] = paired_p(scores[leader][both], scores[job][both], higher_is_better, delta, seed)
        diffs[job] = float(direction * (scores[leader][both].mean() - scores[job][both].mean())) if both.any() else None
    stopped = holm(pvalues, level)
    decisions = [Decision(job, means[job], diffs.get(job), pvalues.get(job, 1.0), job in stopped) for job in scores]
    return Round(number, size, level, leader, means, decisions)


def _value(values: np.ndarray, reduce: Optional[Callable[..., Optional[float]]]) -> Optional[float]:
    """A job's value on the round's samples: the metric's own aggregation, else the mean."""
    if reduce is None:
        return _mean(values)
    value = reduce(*np.asarray(values, dtype=np.float64).T)
    return None if value is None else float(value)


def _mean(values: np.ndarray) -> Optional[float]:
    kept = np.asarray(values, dtype=np.float64)
    kept = kept[~np.isnan(kept)]
    return float(kept.mean()) if kept.size else None


def raced_metric(scorer, name: Optional[str] = None):
    """The metric a race decides on: `name`, else the scorer's first headline metric; it must say
    which way is better (a per-sample mean is tested pairwise, a pooled one by a paired bootstrap)."""
    metrics = {m.name: m for m in scorer.metrics}
    metric = metrics.get(name) if name else next((m for m in scorer.metrics if m.headline), scorer.metrics[0])
    if metric is None:
        raise GradingError(f"hydra.sweeper.metric={name} is not a metric of scorer {scorer.name} "
                           f"(its metrics: {', '.join(metrics)})")
    if metric.higher_is_better is None:
        usable = [m.name for m in scorer.metrics if m.higher_is_better is not None]
        raise GradingError(f"racing needs a metric with a better direction; {metric.name} of {scorer.name} has none: "
                           f"set hydra.sweeper.metric to one of {', '.join(usable)}")
    return metric


def job_scores(run_dir: Path, metric_name: Optional[str] = None) -> tuple[dict[str, object], object, str]:
    """Each record's score on the raced metric (its samples averaged: decoding.samples), under the
    scorer's primary reading: sample_id -> its score (nan where the metric does not apply), or,
    for a pooled metric, the tuple of its sources (F1's tp, fp, fn); the metric, the reading."""
    from grading.files import samples_file
    from grading.repeats import record_level
    from grading.scoring import primary_reading, scorer_of

    samples = pl.read_parquet(samples_file(Path(run_dir)))
    scorer = scorer_of(samples)
    metric, reading = raced_metric(scorer, metric_name), primary_reading(scorer)
    records = record_level(samples, scorer)
    columns = [records[f"{reading}_{source}"].cast(pl.Float64).fill_null(float("nan")).to_list()
               for source in metric.sources]
    values = columns[0] if metric.per_sample else list(zip(*columns))
    return dict(zip(records["sample_id"].to_list(), values)), metric, reading


def read_race(sweep_dir: Path) -> dict:
    """A racing sweep's race.json ({} for any other sweep, or one unreadable)."""
    import json

    try:
        record = json.loads((Path(sweep_dir) / "race.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def race_outcomes(sweep_dir: Path) -> dict[int, str]:
    """For a racing sweep (race.json), each stopped job's reason, by job number: the round and
    records it stopped at, and the leader's lead with its p-value and level; {} for other sweeps."""
    record = read_race(sweep_dir)
    total = record["sizes"][-1] if record.get("sizes") else None
    found = {}
    for outcome in record.get("rounds", []):
        for decision in outcome.get("decisions", []):
            if not decision["stopped"]:
                continue
            for job in decision_jobs(decision):
                found[job] = (
                    f"stopped at round {outcome['round']} after {outcome['size']} of {total} records (partial): "
                    f"job {outcome['leader']} leads on {outcome['metric']} by {decision['diff']:.4f} "
                    f"(one-sided p={decision['p']:.2g} < Holm level at alpha_r={outcome['alpha']:.3g})")
    return found


def decision_jobs(decision: dict) -> list[int]:
    """The job numbers a decision covers: a candidate run as shards (dataset.shard) is several
    jobs, decided together (race.json lists them as `jobs`)."""
    return [int(job) for job in decision.get("jobs") or [decision["job"]]]


def race_table(sweep_dir: Path) -> list[dict[str, object]]:
    """race.json's rounds as rows (round, records, leader, job, value, lead, p, stopped) for reports."""
    record = read_race(sweep_dir)
    return [{"round": o["round"], "records": o["size"], "leader": o["leader"], "job": d["job"], "value": d["value"],
             "lead": d["diff"], "p": d["p"], "stopped": d["stopped"]}
            for o in record.get("rounds", []) for d in o.get("decisions", [])]
