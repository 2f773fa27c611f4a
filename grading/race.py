"""Racing checkpoints: score every candidate on growing nested subsets of the same samples and stop
those shown worse than another with confidence, at a stated error rate.

The statistics only (numpy; the sweeper in hydra_plugins/toolsweep_race runs the rounds):

- Rounds: sample counts growing geometrically from `first` to the whole set; the subsets are
  nested (inference.subsample orders samples once, seeded and stratified), so round r pairs every
  two survivors on the same n_r samples.
- Tests: every ordered pair (k, j) of the round's survivors, one-sided, on the headline metric in
  its declared direction, H0: k - j <= delta. Per-sample 0/1 grades: the exact sign (McNemar) test
  on the discordant pairs (delta = 0). Other per-sample scores (judge scores), or a margin: a
  paired sign-flip permutation test of (k - j - delta), the same flips for every pair. A pooled
  metric (F1 over counts): a paired bootstrap of the difference, the same resamples for every pair.
- A job j is stopped when shown worse than SOME other job: its p-value is (C - 1) * min_k p(k, j)
  for the race's C candidates (Bonferroni over every job it could be shown worse than), and Holm's
  step-down over the round's tested jobs at alpha_r = alpha / R over the R planned rounds.
  Why this holds whichever job leads: if j is in truth within delta of the best, every H0 (k, j)
  is true, so its p-value is a valid one whatever the data made of the others; Holm then bounds
  the chance of stopping any such job in a round by alpha_r, and the rounds together by alpha
  (Bonferroni spending). Testing each job against the round's leader alone would not: the leader
  is the job the same records favour most, which makes each such one-sided test close to a
  two-sided one (two tied jobs: one of them stopped in about 2 alpha_r of rounds). The count
  C - 1 is the race's, not the round's survivors': which jobs survive depends on the records.
- The leader (the best value on the round's records) is recorded for display; no decision
  depends on it.
- `keep` jobs are never stopped (never tested) but show others worse; survivors of the last round
  are scored on every sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import polars as pl

from grading.errors import GradingError
from grading.pairwise import BOOTSTRAPS, FLIPS, MAX_RESAMPLES, holm, holm_adjusted, pairwise_p
from grading.pairwise import bootstrap_p, paired_p, permutation_p, sign_test_p  # noqa: F401 (as before)

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


@dataclass
class Decision:
    """One survivor's tests in a round: every other survivor against it."""

    job: str
    value: Optional[float]
    diff: Optional[float]
    """against - job, in the metric's direction (positive: `against` is better)."""
    p: float
    """The one-sided p of the pair (against, job): that `against` beats this job by more than delta."""
    stopped: bool
    against: Optional[str] = None
    """The other job that shows this one worse most strongly (smallest p); None with no other."""
    adjusted_p: Optional[float] = None
    """p times the race's candidates less one (the jobs it could be shown worse than), then Holm's
    step-down over the round's tested jobs: stopped where at most the round's alpha. None for a
    kept job, which is never tested."""


@dataclass
class Round:
    number: int
    size: int
    alpha: float
    leader: str
    """The best value on the round's records: shown, not used by any decision."""
    values: dict[str, Optional[float]]
    decisions: list[Decision] = field(default_factory=list)


def decide_round(number: int, size: int, scores: dict[str, np.ndarray], higher_is_better: bool,
                 alpha: float, rounds: int, keep: Sequence[str] = (), delta: float = 0.0,
                 seed: int = 0, reduce: Optional[Callable[..., Optional[float]]] = None,
                 candidates: Optional[int] = None,
                 pooled: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> Round:
    """Round `number`'s stops: each survivor not kept is stopped where shown worse than some other
    survivor (pairwise_p for every ordered pair; Bonferroni over the `candidates` - 1 jobs it could
    be shown worse than, `candidates` the race's count, default the jobs in `scores`; Holm over the
    tested jobs at alpha / rounds). `scores`: each survivor's per-sample scores on the round's
    samples, aligned (nan where a sample has no score: left out pairwise); for a pooled metric,
    `reduce` is its aggregation and each job's scores are a (samples, sources) array of its
    per-sample sources (a paired bootstrap tests it; `pooled`, its `Metric.pooled` where it has one,
    takes every resample at once)."""
    jobs = list(scores)
    means = {job: _value(values, reduce) for job, values in scores.items()}
    direction = 1.0 if higher_is_better else -1.0
    ranked = [job for job in jobs if means[job] is not None]
    leader = max(ranked, key=lambda job: (direction * means[job], -jobs.index(job))) if ranked else jobs[0]
    level = alpha / max(rounds, 1)
    tested = [job for job in jobs if job not in keep]
    others = max(candidates or 0, len(jobs)) - 1
    table = pairwise_p(scores, higher_is_better, delta, seed, reduce, _resamples(level, len(tested) * others, reduce),
                       pooled)
    leads = _leads(scores, means, direction, reduce)
    rivals = {job: _rival(table, leads, j) for j, job in enumerate(jobs)}
    raw = {job: (1.0 if rivals[job] is None else float(table[rivals[job], j])) for j, job in enumerate(jobs)}
    bonferroni = {job: min(1.0, others * raw[job]) if others else 1.0 for job in tested}
    stopped, adjusted = holm(bonferroni, level), holm_adjusted(bonferroni)
    decisions = [Decision(job, means[job], _known(leads, rivals[job], j), raw[job], job in stopped,
                          None if rivals[job] is None else jobs[rivals[job]], adjusted.get(job))
                 for j, job in enumerate(jobs)]
    return Round(number, size, level, leader, means, decisions)


def _resamples(level: float, tests: int, reduce: Optional[Callable[..., Optional[float]]]) -> int:
    """Draws for a resampling test whose smallest p, 1 / (draws + 1), is at most half the round's
    first Holm level (level / tests): a job every draw shows worse can be stopped."""
    default = FLIPS if reduce is None else BOOTSTRAPS
    return default if tests <= 0 else min(MAX_RESAMPLES, max(default, math.ceil(2 * tests / level)))


def _leads(scores: dict[str, np.ndarray], means: dict[str, Optional[float]], direction: float,
           reduce: Optional[Callable[..., Optional[float]]]) -> np.ndarray:
    """[k, j]: k's lead over j in the metric's direction, on the records both have (nan: unknown)."""
    jobs = list(scores)
    if reduce is not None:
        values = np.array([math.nan if means[job] is None else means[job] for job in jobs])
        return direction * (values[:, None] - values[None, :])
    grades = np.stack([np.asarray(scores[job], dtype=np.float64) for job in jobs])
    if not np.isnan(grades).any():  # every pair on every record: the means' differences
        return direction * (grades.mean(axis=1)[:, None] - grades.mean(axis=1)[None, :])
    both = ~(np.isnan(grades)[:, None, :] | np.isnan(grades)[None, :, :])
    sums = np.where(both, np.nan_to_num(grades)[:, None, :] - np.nan_to_num(grades)[None, :, :], 0.0).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return direction * sums / both.sum(axis=2)


def _known(leads: np.ndarray, k: Optional[int], j: int) -> Optional[float]:
    return None if k is None or np.isnan(leads[k, j]) else float(leads[k, j])


def _rival(table: np.ndarray, leads: np.ndarray, j: int) -> Optional[int]:
    """The job that shows job j worse most strongly: the smallest p, then the largest lead."""
    others = [k for k in range(table.shape[0]) if k != j]
    if not others:
        return None
    return min(others, key=lambda k: (table[k, j], -leads[k, j] if not np.isnan(leads[k, j]) else math.inf, k))


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
    records it stopped at, the job it was shown worse than with its lead and one-sided p, and the
    p adjusted for every comparison against the round's level; {} for other sweeps."""
    record = read_race(sweep_dir)
    total = record["sizes"][-1] if record.get("sizes") else None
    found = {}
    for outcome in record.get("rounds", []):
        for decision in outcome.get("decisions", []):
            if not decision["stopped"]:
                continue
            # a job stopped in the last round holds every record: its values are not partial
            partial = " (partial)" if outcome["size"] != total else ""
            for job in decision_jobs(decision):
                found[job] = (f"stopped at round {outcome['round']} after {outcome['size']} of {total} records"
                              f"{partial}: {_shown_worse(outcome, decision)}")
    return found


def _shown_worse(outcome: dict, decision: dict) -> str:
    """Why a decision stopped its job; a race.json written before every pair was tested names the
    round's leader and no adjusted p."""
    if decision.get("adjusted_p") is None:
        return (f"job {outcome['leader']} leads on {outcome['metric']} by {decision['diff']:.4f} "
                f"(one-sided p={decision['p']:.2g} < Holm level at alpha_r={outcome['alpha']:.3g})")
    return (f"job {decision['against']} leads it on {outcome['metric']} by {decision['diff']:.4f} "
            f"(one-sided p={decision['p']:.2g}; adjusted for every job it was tested against and Holm over the "
            f"round's jobs, p={decision['adjusted_p']:.2g} <= alpha_r={outcome['alpha']:.3g})")


def decision_jobs(decision: dict) -> list[int]:
    """The job numbers a decision covers: a candidate run as shards (dataset.shard) is several
    jobs, decided together (race.json lists them as `jobs`)."""
    return [int(job) for job in decision.get("jobs") or [decision["job"]]]


def race_table(sweep_dir: Path) -> list[dict[str, object]]:
    """race.json's rounds as rows (round, records, leader, job, value, against: the job that shows it
    worse most strongly, lead: that job's lead, p, adjusted_p, stopped) for reports."""
    record = read_race(sweep_dir)
    return [{"round": o["round"], "records": o["size"], "leader": o["leader"], "job": d["job"], "value": d["value"],
             "against": d.get("against", o["leader"] if d["job"] != o["leader"] else None), "lead": d["diff"],
             "p": d["p"], "adjusted_p": d.get("adjusted_p"), "stopped": d["stopped"]}
            for o in record.get("rounds", []) for d in o.get("decisions", [])]
