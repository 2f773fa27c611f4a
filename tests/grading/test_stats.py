"""Bootstrap CIs and the exact McNemar test: known values, determinism, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grading.errors import GradingError
from grading.stats import bootstrap_ci, clustered_ci, mcnemar_exact, metric_ci, paired_bootstrap_ci, resampled_ci

# (id, b_only, a_only, expected p, reason)
MCNEMAR_CASES = [
    ("no_discordant", 0, 0, 1.0, "no discordant pairs: no evidence either way"),
    ("ten_one_way", 10, 0, 2 * 0.5**10, "all ten flips one way: 2 * 0.5^10"),
    ("ten_other_way", 0, 10, 2 * 0.5**10, "the test is symmetric in the two runs"),
    ("three_five", 3, 5, 0.7265625, "2 * (1+8+28+56) / 256"),
    ("five_three", 5, 3, 0.7265625, "symmetric"),
    ("tie", 4, 4, 1.0, "a tie doubles past 1 and is capped at 1"),
    ("one_zero", 1, 0, 1.0, "one flip is never significant"),
    ("six_zero", 6, 0, 0.03125, "2 * 0.5^6"),
]


@pytest.mark.parametrize("b_only,a_only,expected", [c[1:4] for c in MCNEMAR_CASES],
                         ids=[c[0] for c in MCNEMAR_CASES])
def test_mcnemar_known_values(b_only, a_only, expected):
    assert mcnemar_exact(b_only, a_only) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_large_counts_stay_exact():
    # 2**3000 overflows a float; integer arithmetic must still give a p-value in (0, 1].
    assert mcnemar_exact(1500, 1400) == pytest.approx(0.0664, abs=0.005)
    assert 0.0 <= mcnemar_exact(3000, 0) < 1e-300
    assert mcnemar_exact(np.int64(3), np.int64(5)) == 0.7265625


@pytest.mark.parametrize("b_only,a_only", [(-1, 0), (1.5, 2), (True, 0), (0, None)],
                         ids=["negative", "float", "bool", "none"])
def test_mcnemar_rejects_non_counts(b_only, a_only):
    with pytest.raises(GradingError, match="non-negative integer count"):
        mcnemar_exact(b_only, a_only)


# (id, correct, reason)
CI_CASES = [
    ("mixed_30pct", [True] * 30 + [False] * 70, "an ordinary accuracy"),
    ("mixed_small", [True, False, False, True, True], "few samples: a wide interval"),
    ("all_right", [True] * 12, "no variation: the interval collapses on 1"),
    ("all_wrong", [False] * 12, "no variation: the interval collapses on 0"),
    ("one_sample", [True], "a single sample"),
]


@pytest.mark.parametrize("correct", [c[1] for c in CI_CASES], ids=[c[0] for c in CI_CASES])
def test_bootstrap_ci_contains_the_mean_and_is_deterministic(correct):
    mean = sum(correct) / len(correct)
    low, high = bootstrap_ci(correct)
    assert 0.0 <= low <= mean <= high <= 1.0
    assert bootstrap_ci(correct) == (low, high)
    assert bootstrap_ci(np.array(correct)) == (low, high)


def test_bootstrap_ci_width_and_seed():
    correct = [True] * 30 + [False] * 70
    low, high = bootstrap_ci(correct)
    # Normal approximation: 0.3 +- 1.96 * sqrt(0.3 * 0.7 / 100) = [0.21, 0.39].
    assert low == pytest.approx(0.21, abs=0.02) and high == pytest.approx(0.39, abs=0.02)
    narrow = bootstrap_ci(correct, level=0.5)
    assert low < narrow[0] <= narrow[1] < high
    # The seed picks the resamples: another seed moves a fine-grained interval (1000 samples).
    fine = [True] * 337 + [False] * 663
    assert bootstrap_ci(fine, seed=1) != bootstrap_ci(fine, seed=0) == bootstrap_ci(fine, seed=0)


def test_bootstrap_ci_empty_is_nan():
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    assert all(math.isnan(v) for v in paired_bootstrap_ci([], []))


@pytest.mark.parametrize("kwargs,message", [({"level": 1.0}, "level must be between 0 and 1"),
                                            ({"level": 95}, "level must be between 0 and 1"),
                                            ({"n_resamples": 0}, "n_resamples must be at least 1")],
                         ids=["level_one", "level_percent", "no_resamples"])
def test_bootstrap_rejects_bad_arguments(kwargs, message):
    with pytest.raises(GradingError, match=message):
        bootstrap_ci([True, False], **kwargs)


def test_bootstrap_rejects_missing_grades():
    with pytest.raises(GradingError, match="1 missing values"):
        bootstrap_ci([True, None, False])


# (id, a, b, expected interval or None for "contains the difference", reason)
PAIRED_CASES = [
    ("identical", [True, False, True, False], [True, False, True, False], (0.0, 0.0),
     "a run against itself: no difference in any resample"),
    ("b_always_right", [False] * 6, [True] * 6, (1.0, 1.0), "every pair gained"),
    ("b_always_wrong", [True] * 6, [False] * 6, (-1.0, -1.0), "every pair lost"),
    ("some_gains", [True] * 20 + [False] * 30, [True] * 20 + [True] * 10 + [False] * 20, None,
     "10 of 50 pairs gained: diff 0.2, interval above 0"),
]


@pytest.mark.parametrize("a,b,expected", [c[1:4] for c in PAIRED_CASES], ids=[c[0] for c in PAIRED_CASES])
def test_paired_bootstrap_ci(a, b, expected):
    low, high = paired_bootstrap_ci(a, b)
    if expected is not None:
        assert (low, high) == expected
    else:
        diff = sum(b) / len(b) - sum(a) / len(a)
        assert 0 < low <= diff <= high
    assert paired_bootstrap_ci(a, b) == (low, high)


def test_paired_bootstrap_matches_resampling_pair_indices():
    # The implementation samples how often each kind of pair is drawn; drawing explicit pair
    # indices must give the same interval up to Monte Carlo error.
    rng = np.random.default_rng(7)
    a = rng.random(200) < 0.4
    b = np.where(rng.random(200) < 0.8, a, ~a)
    idx = np.random.default_rng(3).integers(0, 200, size=(20000, 200))
    reference = np.quantile((b[idx].astype(float) - a[idx]).mean(axis=1), [0.025, 0.975])
    got = paired_bootstrap_ci(a, b, n_resamples=20000)
    assert got == pytest.approx(tuple(reference), abs=0.012)


def test_paired_bootstrap_rejects_unequal_lengths():
    with pytest.raises(GradingError, match="equal length, got 2 and 3"):
        paired_bootstrap_ci([True, False], [True, False, True])


# (id, statistic of the picked rows, size, expected interval, reason)
RESAMPLED_CASES = [
    ("constant", lambda pick: 0.5, 10, (0.5, 0.5), "a statistic that never moves"),
    ("undefined_sometimes", lambda pick: None if pick[0] % 2 else 1.0, 10, (1.0, 1.0),
     "resamples where it is undefined are left out"),
    ("never_defined", lambda pick: None, 10, "nan", "no resample defines it"),
    ("nan_is_undefined", lambda pick: math.nan, 10, "nan", "nan counts as undefined too"),
    ("no_rows", lambda pick: 1.0, 0, "nan", "nothing to resample"),
]


@pytest.mark.parametrize("statistic,size,expected", [c[1:4] for c in RESAMPLED_CASES],
                         ids=[c[0] for c in RESAMPLED_CASES])
def test_resampled_ci(statistic, size, expected):
    low, high = resampled_ci(statistic, size, n_resamples=200)
    if expected == "nan":
        assert math.isnan(low) and math.isnan(high)
    else:
        assert (low, high) == expected


@pytest.mark.parametrize("rows,n_resamples", [(40, 300), (1000, 2000), (3, 5000)], ids=["few", "many", "blocks"])
def test_resampled_ci_is_the_metric_ci_of_a_pooled_metric(rows, n_resamples, monkeypatch):
    """F1 over pooled counts: metric_ci takes every resample's sums at once (Metric.pooled) and
    gives exactly what resampled_ci gives over its reduce, one resample at a time: the same draws,
    the same sums, the same F1, nulls among the counts included, over several blocks of draws too."""
    import grading.stats
    from grading.scoring import f1

    monkeypatch.setattr(grading.stats, "POOLED_BLOCK", 1000)  # `blocks`: 333 resamples per block
    metric = f1("f1", "x")
    rng = np.random.default_rng(5)
    tp, fp, fn = (rng.integers(0, 3, rows).astype(float) for _ in range(3))
    fn[::4] = np.nan
    got = metric_ci(metric, [tp, fp, fn], n_resamples=n_resamples, seed=4)
    assert got == resampled_ci(lambda pick: metric.reduce(tp[pick], fp[pick], fn[pick]), rows, n_resamples, 4)
    assert got[0] <= metric.reduce(tp, fp, fn) <= got[1]


def test_a_pooled_metric_over_repeated_samples_resamples_records_as_the_loop_does():
    """clustered_ci of F1: each record's summed counts, drawn as resampled_ci draws the records."""
    from grading.scoring import f1

    metric = f1("f1", "x")
    rng = np.random.default_rng(6)
    tp, fp, fn = (rng.integers(0, 2, 60).astype(float) for _ in range(3))
    matrix = np.arange(60).reshape(20, 3)
    matrix[::4, 2] = 60  # records with one sample fewer: the padding reads as a null
    padded = [np.append(a, np.nan) for a in (tp, fp, fn)]
    loop = resampled_ci(lambda pick: metric.reduce(*(a[matrix[pick].ravel()] for a in padded)), 20, 2000, 0)
    assert clustered_ci(metric, [tp, fp, fn], matrix) == loop


@pytest.mark.parametrize("numerator,denominator,expected", [
    ([0.0, 0.0], [0.0, 0.0], "nan"), ([1.0, 0.0, 2.0], [2.0, 1.0, 1.0], None)], ids=["undefined", "defined"])
def test_a_ratio_of_sums_resamples_as_its_reduce(numerator, denominator, expected):
    from grading.scoring import ratio

    metric = ratio("r", "a", "b", higher_is_better=True, ci=True)
    a, b = np.array(numerator), np.array(denominator)
    got = metric_ci(metric, [a, b], n_resamples=500, seed=2)
    loop = resampled_ci(lambda pick: metric.reduce(a[pick], b[pick]), a.size, 500, 2)
    if expected == "nan":
        assert all(math.isnan(v) for v in got + loop)
    else:
        assert got == pytest.approx(loop, rel=1e-12, abs=0)


def test_resampled_ci_checks_its_arguments():
    with pytest.raises(GradingError, match="level must be between 0 and 1, got 1.5"):
        resampled_ci(lambda pick: 1.0, 5, level=1.5)
    with pytest.raises(GradingError, match="n_resamples must be at least 1, got 0"):
        resampled_ci(lambda pick: 1.0, 5, n_resamples=0)
