"""Racing, simulated (no model): how often a race picks the best checkpoint, how often it stops the
true best, and what it spends against a full sweep. `make bench` runs it (section `race`);
`python scripts/race_sim.py --races 500` alone writes docs/race-simulation.json and .png,
and docs/race-ties.json.

Per-sample correctness of checkpoint k on sample i is 1[a_k + z_i + e_ki > 0]: z_i the sample's
ease (shared by all checkpoints: a hard sample is hard for all), e_ki an AR(1) noise across
checkpoints (neighbours make correlated mistakes, rho 0.8), both N(0, 1), so checkpoint k's true
accuracy is Phi(a_k / sqrt(2)). Three training curves of 20 checkpoints over 3000 samples, and ties:
K checkpoints all of accuracy 0.7 (K = 2, 10, 20), where any stop is an error: the share of races
that stop a given tied job (job 0), and any of them, must stay within alpha.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from grading.race import DEFAULT_ALPHA, decide_round, round_sizes  # noqa: E402

CHECKPOINTS, SAMPLES, RHO = 20, 3000, 0.8


def curves() -> dict[str, np.ndarray]:
    """True accuracies of the 20 checkpoints for each shape: a rise to a plateau of near-ties (8
    checkpoints within 0.6 point; `plateau_wide`: 10), a late best one point above the rest, a
    peak then a slow decline."""
    k = np.arange(CHECKPOINTS)
    jitter = np.array([0, .003, -.002, .004, .001, -.003, .002, 0, .004, .001,
                       -.001, .003, .002, -.002, .0, .001, .003, .002, -.001, .004])
    plateau = np.where(k < 12, 0.30 + 0.32 * k / 12, 0.62 + jitter)
    wide = np.where(k < 10, 0.30 + 0.32 * k / 10, 0.62 + jitter)
    late = np.minimum(0.30 + 0.30 * k / 10, 0.60)
    late[-1] = 0.61
    peak = np.where(k <= 8, 0.30 + 0.34 * k / 8, 0.64 - 0.003 * (k - 8))
    return {"plateau": plateau, "plateau_wide": wide, "late_best": late, "peak_decline": peak}


def correctness(accuracy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A checkpoints x samples 0/1 matrix with the curve's accuracies and neighbour correlation."""
    inv = statistics.NormalDist().inv_cdf
    a = np.array([inv(p) for p in accuracy]) * np.sqrt(2)
    ease = rng.standard_normal(SAMPLES)
    noise = np.empty((len(accuracy), SAMPLES))
    noise[0] = rng.standard_normal(SAMPLES)
    for k in range(1, len(accuracy)):
        noise[k] = RHO * noise[k - 1] + np.sqrt(1 - RHO**2) * rng.standard_normal(SAMPLES)
    return (a[:, None] + ease[None, :] + noise > 0).astype(np.float64)


def race(grades: np.ndarray, alpha: float, first: int, growth: float, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """One race over a checkpoints x samples matrix (sample order already random)."""
    sizes = round_sizes(grades.shape[1], first, growth)
    alive = [str(k) for k in range(grades.shape[0])]
    spent, previous, stopped_at = 0, 0, {}
    for number, size in enumerate(sizes, start=1):
        spent += len(alive) * (size - previous)  # the cache: each round generates only its new samples
        previous = size
        result = decide_round(number, size, {job: grades[int(job), :size] for job in alive}, True, alpha,
                              len(sizes), keep, candidates=grades.shape[0])
        for decision in result.decisions:
            if decision.stopped:
                stopped_at[decision.job] = number
        alive = [job for job in alive if job not in stopped_at]
    final = {job: grades[int(job)].mean() for job in alive}
    return {"pick": int(max(final, key=lambda job: (final[job], -int(job)))), "stopped": stopped_at,
            "spent": spent / grades.size, "rounds": len(sizes)}


def simulate(races: int = 500, alpha: float = DEFAULT_ALPHA, first: int = 100, growth: float = 2.0,
             seed: int = 0) -> dict[str, Any]:
    """Every curve's figures over `races` races with these settings."""
    results = {}
    for shape, accuracy in curves().items():
        rng = np.random.default_rng(seed)
        best = int(np.argmax(accuracy))
        near = lambda k: accuracy[best] - accuracy[k] <= 0.01 + 1e-12  # noqa: E731 - within one point
        picks_near, full_near, best_stopped, spent = 0, 0, 0, []
        for _ in range(races):
            grades = correctness(accuracy, rng)
            outcome = race(grades, alpha, first, growth)
            picks_near += near(outcome["pick"])
            full_near += near(int(np.argmax(grades.mean(axis=1))))
            best_stopped += str(best) in outcome["stopped"]
            spent.append(outcome["spent"])
        results[shape] = {"pick_within_1pt": picks_near / races, "full_sweep_within_1pt": full_near / races,
                          "true_best_stopped": best_stopped / races, "median_spent": float(np.median(spent)),
                          "best": best, "races": races}
    return {"settings": {"alpha": alpha, "first": first, "growth": growth, "checkpoints": CHECKPOINTS,
                         "samples": SAMPLES, "rho": RHO}, "curves": results}


def ties(races: int = 2000, jobs: tuple[int, ...] = (2, 10, 20), accuracy: float = 0.7, alpha: float = DEFAULT_ALPHA,
         first: int = 100, growth: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """How often a race stops a job tied with the best: `jobs` checkpoints all of `accuracy` (any
    stop is an error), over `races` races each; rates with their 95% Wilson intervals."""
    results = {}
    for count in jobs:
        rng = np.random.default_rng(seed)
        given, anyone, stops = 0, 0, 0
        for _ in range(races):
            stopped = race(correctness(np.full(count, accuracy), rng), alpha, first, growth)["stopped"]
            given, anyone, stops = given + ("0" in stopped), anyone + bool(stopped), stops + len(stopped)
        results[str(count)] = {"given_job_stopped": _rate(given, races), "any_job_stopped": _rate(anyone, races),
                               "mean_job_stopped": stops / (count * races), "races": races}
    return {"settings": {"alpha": alpha, "first": first, "growth": growth, "accuracy": accuracy, "samples": SAMPLES,
                         "rho": RHO}, "jobs": results}


def _rate(hits: int, trials: int, z: float = 1.959963984540054) -> dict[str, float]:
    """hits / trials with its 95% Wilson score interval."""
    share = hits / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return {"rate": share, "low": max(0.0, centre - half), "high": min(1.0, centre + half), "hits": hits}


def plot(figures: list[dict[str, Any]], path: Path) -> None:
    from grading.plots import new_figure

    fig = new_figure(14, 3.6)
    axes = fig.subplots(1, 4)
    for ax, (shape, accuracy) in zip(axes, curves().items()):
        ax.plot(range(CHECKPOINTS), accuracy * 100, marker="o")
        ax.set_title(shape)
        ax.set_xlabel("checkpoint")
        ax.set_ylabel("true accuracy (%)")
        default = figures[0]["curves"][shape]
        ax.text(0.02, 0.02, f"within 1 pt: {default['pick_within_1pt']:.0%} (full {default['full_sweep_within_1pt']:.0%})"
                f"\nbest stopped: {default['true_best_stopped']:.1%}\nspent: {default['median_spent']:.0%}",
                transform=ax.transAxes, fontsize=8)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=500)
    parser.add_argument("--tie-races", type=int, default=2000, help="races per count of tied jobs")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs")
    args = parser.parse_args(argv)
    variants = [dict(), dict(first=50), dict(first=200), dict(growth=1.5), dict(alpha=0.1)]
    figures = [simulate(args.races, **variant) for variant in variants]
    tied = ties(args.tie_races)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "race-simulation.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    (args.out / "race-ties.json").write_text(json.dumps(tied, indent=2) + "\n", encoding="utf-8")
    plot(figures, args.out / "race-simulation.png")
    print(json.dumps(tied["settings"]))
    for count, values in tied["jobs"].items():
        print(f"  {count} tied: {json.dumps(values)}")
    for figure in figures:
        print(json.dumps(figure["settings"]))
        for shape, values in figure["curves"].items():
            print(f"  {shape}: {json.dumps(values)}")


if __name__ == "__main__":
    main()
