"""A race round's stops (grading.race.decide_round): the leader is chosen on the same records it
would be tested on, so a job is stopped only when shown worse than some other job, every ordered
pair tested, the comparisons counted in the level; the chance of stopping a job tied with the best
is then at most alpha whichever job leads. The sign test, the sign-flip permutation test and the
paired bootstrap each give the whole pairwise table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grading.race import bootstrap_p, decide_round, holm, pairwise_p, permutation_p, round_sizes, sign_test_p
from grading.scoring import _f1


def _binomial_upper(trials: int, rate: float, tail: float = 0.001) -> int:
    """The smallest count c with P(Bin(trials, rate) > c) <= tail: a procedure whose true rate is
    at most `rate` exceeds c in at most 0.1% of seeds."""
    cumulative = 0.0
    for count in range(trials + 1):
        cumulative += math.comb(trials, count) * rate**count * (1 - rate) ** (trials - count)
        if 1 - cumulative <= tail:
            return count
    return trials


def _tied_race(rng: np.random.Generator, jobs: int, records: int, accuracy: float = 0.7) -> set[str]:
    """The jobs one race stops among `jobs` checkpoints all right on `accuracy` of the records
    (independent mistakes), at the default alpha over rounds of 50, 100, 200, 300 records."""
    grades = (rng.random((jobs, records)) < accuracy).astype(float)
    sizes = round_sizes(records, 50, 2)
    alive, stopped = [str(k) for k in range(jobs)], set()
    for number, size in enumerate(sizes, start=1):
        result = decide_round(number, size, {job: grades[int(job), :size] for job in alive}, True, 0.05, len(sizes))
        stopped |= {d.job for d in result.decisions if d.stopped}
        alive = [job for job in alive if job not in stopped]
    return stopped


def test_jobs_tied_with_the_best_are_stopped_in_at_most_alpha_of_races():
    """10 tied jobs, 300 races: testing each against the leader picked on the same records stopped
    one of them in about 20% of races; the bound is alpha's 99.9% binomial limit (27 of 300)."""
    rng = np.random.default_rng(7)
    races = 300
    stops = [_tied_race(rng, 10, 300) for _ in range(races)]
    bound = _binomial_upper(races, 0.05)
    anyone, given = sum(bool(s) for s in stops), sum("0" in s for s in stops)
    assert anyone <= bound, f"a tied job was stopped in {anyone} of {races} races, above alpha's limit {bound}"
    assert given <= _binomial_upper(races, 0.05 / 2), f"job 0 (tied) was stopped in {given} of {races} races"


def _pair(ahead: int, behind: int, same: int = 40) -> dict[str, np.ndarray]:
    """Two jobs' 0/1 grades: job 0 right and job 1 wrong on `ahead` records, the reverse on
    `behind`, both right on `same`."""
    zero = np.array([1.0] * ahead + [0.0] * behind + [1.0] * same)
    one = np.array([0.0] * ahead + [1.0] * behind + [1.0] * same)
    return {"0": zero, "1": one}


@pytest.mark.parametrize("ahead, behind, stopped", [
    pytest.param(20, 10, False, id="p=0.049-one-sided-is-0.099-with-the-leader-picked-by-the-data"),
    pytest.param(21, 9, True, id="p=0.021-stops:-both-directions-tested-at-alpha/2"),
])
def test_two_jobs_are_tested_both_ways(ahead, behind, stopped):
    result = decide_round(1, 70, _pair(ahead, behind), True, 0.05, 1)
    assert result.leader == "0"
    decision = {d.job: d for d in result.decisions}["1"]
    assert decision.p == pytest.approx(sign_test_p(ahead, behind))
    assert decision.adjusted_p == pytest.approx(2 * sign_test_p(ahead, behind)), "Holm over the two jobs"
    assert decision.stopped is stopped and decision.against == "0"
    assert not {d.job: d for d in result.decisions}["0"].stopped


def _three(rng: np.random.Generator, records: int = 300) -> dict[str, np.ndarray]:
    """A leads (72%); B (70%) mistakes independent of A's; C is B wrong on 12 more records, so C
    is clearly worse than B (12 records to none) but not clearly worse than A."""
    a = (rng.random(records) < 0.72).astype(float)
    b = (rng.random(records) < 0.70).astype(float)
    c = b.copy()
    c[np.flatnonzero(b == 1)[:12]] = 0
    return {"A": a, "B": b, "C": c}


def test_a_job_is_stopped_when_shown_worse_than_any_other_not_only_the_leader():
    scores = _three(np.random.default_rng(1))
    result = decide_round(1, 300, scores, True, 0.05, 1)
    decisions = {d.job: d for d in result.decisions}
    assert result.leader == "A" and sign_test_p(12, 0) < 0.001 < 0.05 < sign_test_p(
        int(np.sum((scores["A"] == 1) & (scores["C"] == 0))), int(np.sum((scores["A"] == 0) & (scores["C"] == 1))))
    assert decisions["C"].stopped and decisions["C"].against == "B"
    assert decisions["C"].diff == pytest.approx(12 / 300), "B's lead over C, in the metric's units"
    assert decisions["C"].p == pytest.approx(sign_test_p(12, 0))
    # two comparators (A, B) for C, then Holm over the three tested jobs: C's is the smallest p
    assert decisions["C"].adjusted_p == pytest.approx(3 * 2 * sign_test_p(12, 0))
    assert {d.job for d in result.decisions if d.stopped} == {"C"}
    assert result.alpha == 0.05


def test_adjusted_p_values_step_down_as_holm_over_jobs_after_bonferroni_over_comparators():
    rng = np.random.default_rng(5)
    scores = {str(k): (rng.random(400) < accuracy).astype(float) for k, accuracy in enumerate((0.45, 0.55, 0.7, 0.72))}
    result = decide_round(2, 400, scores, True, 0.05, 4)
    table = pairwise_p(scores, True)
    jobs = list(scores)
    bonferroni = {j: min(1.0, 3 * min(table[i, jobs.index(j)] for i in range(4) if jobs[i] != j)) for j in jobs}
    ordered = sorted(jobs, key=lambda j: bonferroni[j])
    adjusted, running = {}, 0.0
    for rank, job in enumerate(ordered):
        running = max(running, min(1.0, (4 - rank) * bonferroni[job]))
        adjusted[job] = running
    for decision in result.decisions:
        assert decision.adjusted_p == pytest.approx(adjusted[decision.job])
        assert decision.stopped == (decision.job in holm(bonferroni, 0.05 / 4))
    assert {d.job for d in result.decisions if d.stopped} == {"0", "1"}


def test_a_kept_job_is_never_stopped_but_still_shows_another_worse():
    scores = _three(np.random.default_rng(1))
    scores["B"], scores["C"] = scores["C"], scores["B"]  # now B is the worse one, C its better
    result = decide_round(1, 300, scores, True, 0.05, 1, keep=["C", "A"])
    decisions = {d.job: d for d in result.decisions}
    assert decisions["B"].stopped and decisions["B"].against == "C"
    assert decisions["B"].adjusted_p == pytest.approx(2 * sign_test_p(12, 0)), "one job tested, two comparators"
    assert not decisions["C"].stopped and decisions["C"].adjusted_p is None, "a kept job is not tested"


def test_the_race_counts_every_candidate_it_started_with_as_a_comparator():
    """A job's comparisons are counted over the race's candidates, not only this round's survivors:
    which jobs survive depends on the records, so a count that shrank with them would not hold."""
    scores = _three(np.random.default_rng(1))
    alone = decide_round(3, 300, scores, True, 0.05, 4)
    counted = decide_round(3, 300, scores, True, 0.05, 4, candidates=10)
    assert {d.job: d.adjusted_p for d in counted.decisions}["C"] == pytest.approx(
        {d.job: d.adjusted_p for d in alone.decisions}["C"] * 9 / 2)


def test_the_pairwise_tables_are_each_pairs_own_test():
    """Entry [k, j]: the one-sided p that k beats j, as the two-job test gives it (same seed)."""
    rng = np.random.default_rng(3)
    binary = {str(k): (rng.random(200) < 0.6 + 0.05 * k).astype(float) for k in range(3)}
    table = pairwise_p(binary, True)
    for k in range(3):
        for j in range(3):
            if k != j:
                better = int(np.sum((binary[str(k)] == 1) & (binary[str(j)] == 0)))
                worse = int(np.sum((binary[str(k)] == 0) & (binary[str(j)] == 1)))
                assert table[k, j] == pytest.approx(sign_test_p(better, worse), rel=1e-12)
    binary["3"] = np.where(binary["2"] == 1, 1.0, 0.5)  # a record's two samples, one right: 0.5
    mixed = pairwise_p(binary, True)
    assert np.array_equal(mixed[:3, :3], table), "two 0/1 jobs keep their sign test beside a scored one"
    assert mixed[3, 0] == pytest.approx(permutation_p(binary["3"] - binary["0"]), abs=0.02)
    judged = {str(k): rng.integers(1, 6, 60).astype(float) + k * 0.3 for k in range(3)}
    judged["1"][[4, 9]] = np.nan  # a case the judge could not score is left out of its pairs
    table = pairwise_p(judged, False, delta=0.1, seed=4)
    for k, j in ((0, 1), (1, 0), (2, 1), (0, 2)):
        both = ~(np.isnan(judged[str(k)]) | np.isnan(judged[str(j)]))
        expected = permutation_p(-(judged[str(k)] - judged[str(j)])[both], 0.1, seed=4)
        assert table[k, j] == pytest.approx(expected, abs=0.02), "lower is better: k's lead is j - k"
    pooled = {name: np.stack([right, ~right, ~right], axis=1).astype(float)
              for name, right in (("0", rng.random(150) < 0.8), ("1", rng.random(150) < 0.6))}
    table = pairwise_p(pooled, True, reduce=_f1, seed=2)
    assert table[0, 1] == bootstrap_p(pooled["0"], pooled["1"], _f1, True, seed=2)
    assert table[1, 0] == bootstrap_p(pooled["1"], pooled["0"], _f1, True, seed=2)


@pytest.mark.parametrize("kind", ["judge scores (permutation)", "pooled F1 (bootstrap)"])
def test_resampling_tests_draw_enough_resamples_to_reach_the_first_level(kind):
    """Seven candidates over six rounds: the first level is 0.05 / 6 / (7 * 6) = 2.0e-4, below the
    smallest p of 4000 sign flips (1/4001) or 2000 bootstraps (1/2001); a job clearly worse than
    all others is still stopped, because the tests resample as often as the level needs."""
    rng = np.random.default_rng(8)
    if kind.startswith("judge"):
        scores = {str(k): np.clip(rng.normal(4, 0.5, 120), 1, 5) for k in range(6)}
        scores["6"] = np.clip(rng.normal(2, 0.5, 120), 1, 5)
        reduce = None
    else:
        scores = {str(k): np.stack([r := rng.random(300) < 0.8, ~r, ~r], axis=1).astype(float) for k in range(6)}
        scores["6"] = np.stack([r := rng.random(300) < 0.4, ~r, ~r], axis=1).astype(float)
        reduce = _f1
    result = decide_round(1, 300, scores, True, 0.05, 6, reduce=reduce)
    assert {d.job for d in result.decisions if d.stopped} == {"6"}
    assert {d.job: d for d in result.decisions}["6"].adjusted_p <= 0.05 / 6


def test_a_pooled_metrics_bootstrap_takes_every_resample_at_once_with_the_same_decisions():
    """Metric.pooled in the paired bootstrap (the race sweeper passes it): the same draws, the
    refinement's included (seven candidates over six rounds), so the same p-values and stops as
    one `reduce` call per job and resample, nulls among the counts too."""
    from grading.scoring import f1

    metric = f1("f1", "x")
    rng = np.random.default_rng(8)
    scores = {str(k): np.stack([r := rng.random(300) < 0.8, ~r, ~r], axis=1).astype(float) for k in range(6)}
    scores["6"] = np.stack([r := rng.random(300) < 0.4, ~r, ~r], axis=1).astype(float)
    scores["2"][::7, 2] = np.nan
    one_by_one = decide_round(1, 300, scores, True, 0.05, 6, reduce=metric.reduce)
    at_once = decide_round(1, 300, scores, True, 0.05, 6, reduce=metric.reduce, pooled=metric.pooled)
    assert at_once == one_by_one and {d.job for d in at_once.decisions if d.stopped} == {"6"}


def test_a_stopped_jobs_reason_names_the_job_it_was_shown_worse_than(tmp_path):
    """race.json as the sweeper writes it (asdict of each Decision), and one written before every
    pair was tested (no `against`, no `adjusted_p`), which still reads."""
    import json
    from dataclasses import asdict

    from grading.race import race_outcomes, race_table

    result = decide_round(1, 300, _three(np.random.default_rng(1)), True, 0.05, 2)
    renamed = {"A": "0", "B": "1", "C": "2"}
    decisions = [{**asdict(d), "job": renamed[d.job], "against": renamed[d.against]} for d in result.decisions]
    older = [{"job": "0", "value": 0.7, "diff": None, "p": 1.0, "stopped": False},
             {"job": "1", "value": 0.5, "diff": 0.2, "p": 1e-6, "stopped": True}]
    rounds = [{"round": 1, "size": 300, "leader": "0", "alpha": 0.025, "metric": "call_acc", "decisions": decisions},
              {"round": 2, "size": 600, "leader": "0", "alpha": 0.025, "metric": "call_acc", "decisions": older}]
    (tmp_path / "race.json").write_text(json.dumps({"sizes": [300, 600], "rounds": rounds}))
    reasons = race_outcomes(tmp_path)
    assert reasons[2].startswith("stopped at round 1 after 300 of 600 records (partial): job 1 leads it on call_acc "
                                 "by 0.0400")
    assert decisions[2]["adjusted_p"] == pytest.approx(3 * 2 * sign_test_p(12, 0))
    assert reasons[2].endswith(f"(one-sided p={sign_test_p(12, 0):.2g}; adjusted for every job it was tested against "
                               f"and Holm over the round's jobs, p={decisions[2]['adjusted_p']:.2g} <= alpha_r=0.025)")
    assert reasons[1] == ("stopped at round 2 after 600 of 600 records: job 0 leads on call_acc by 0.2000 "
                          "(one-sided p=1e-06 < Holm level at alpha_r=0.025)"), "the last round's stop is not partial"
    rows = {(r["round"], r["job"]): r for r in race_table(tmp_path)}
    assert (rows[1, "2"]["against"], rows[1, "2"]["adjusted_p"]) == ("1", decisions[2]["adjusted_p"])
    assert (rows[2, "1"]["against"], rows[2, "1"]["adjusted_p"]) == ("0", None)
