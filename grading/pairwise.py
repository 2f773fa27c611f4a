"""The racing sweep's pairwise tests (numpy only): for two jobs' paired per-sample scores, the
one-sided p that one beats the other by more than delta, and for a round's survivors the whole
table of them, every ordered pair on the same draws. grading.race decides a round from the table.

- 0/1 grades with delta 0: the exact sign (McNemar) test on the discordant records.
- Other per-sample scores, or a margin: a paired sign-flip permutation test.
- A pooled metric (F1 over counts): a paired bootstrap of the difference (a percentile test).
- Holm's step-down over a family, and its adjusted p-values.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from grading.stats import resampled_counts, resampled_statistics


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


def holm_adjusted(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values: a hypothesis is rejected at level alpha (holm) exactly
    where its adjusted p is at most alpha, up to rounding."""
    adjusted, running = {}, 0.0
    ordered = sorted(pvalues.items(), key=lambda item: (item[1], item[0]))
    for rank, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * p))
        adjusted[name] = running
    return adjusted


FLIPS, BOOTSTRAPS, MAX_RESAMPLES = 4000, 2000, 200_000
"""The resampling tests' draws: the defaults for every pair; up to MAX_RESAMPLES, where the round's
first Holm level is below the smallest p the defaults can give (1 / (draws + 1)), for the pairs
whose p is at that floor (no draw reached their observed lead)."""


def pairwise_p(scores: dict[str, np.ndarray], higher_is_better: bool, delta: float = 0.0, seed: int = 0,
               reduce: Optional[Callable[..., Optional[float]]] = None,
               resamples: Optional[int] = None,
               pooled: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> np.ndarray:
    """Entry [k, j]: the one-sided p that job k beats job j by more than `delta` (H0: k - j <=
    delta), for every ordered pair of `scores`' jobs, in their order (the diagonal is 1). Two jobs
    of 0/1 grades with delta 0: the exact sign test; other per-sample scores: a paired sign-flip
    permutation test (nan left out pairwise), the same flips for every pair; a pooled metric (`reduce`, each
    job a (samples, sources) array): a paired bootstrap, the same resamples for every pair.
    `resamples`: the resampling tests' draws (default FLIPS, BOOTSTRAPS). `pooled`: the metric
    from each source's sum (`Metric.pooled`), where it has one: the same draws and p-values, every
    resample's sums at once instead of one `reduce` call per job and resample."""
    arrays = [np.asarray(values, dtype=np.float64) for values in scores.values()]
    up = 1.0 if higher_is_better else -1.0
    if len(arrays) < 2:
        return np.ones((len(arrays), len(arrays)))
    if reduce is not None:
        return _bootstrap_table(arrays, reduce, up, delta, resamples or BOOTSTRAPS, seed, pooled)
    grades = np.stack(arrays)
    binary = np.array([np.isin(row[~np.isnan(row)], (0.0, 1.0)).all() for row in grades])
    table = np.ones((len(arrays), len(arrays)))
    if delta == 0 and binary.any():
        right, wrong = (grades == 1).astype(np.float64), (grades == 0).astype(np.float64)
        better = right @ wrong.T if up > 0 else wrong @ right.T  # [k, j]: records k has right and j wrong
        table = sign_test_ps(better, better.T)
    sign_tested = np.outer(binary, binary) if delta == 0 else np.zeros_like(table, dtype=bool)
    if not sign_tested.all():  # a pair with a score other than 0/1, or a margin: sign flips
        table = np.where(sign_tested, table, _sign_flip_table(up * grades, delta, resamples or FLIPS, seed))
    np.fill_diagonal(table, 1.0)
    return table


def sign_test_ps(better: np.ndarray, worse: np.ndarray) -> np.ndarray:
    """sign_test_p for arrays of counts at once (the same exact tails, summed in log space)."""
    better, n = np.asarray(better).astype(np.int64), (np.asarray(better) + np.asarray(worse)).astype(np.int64)
    if n.size == 0 or n.max() == 0:
        return np.ones(n.shape)
    logf, i = _log_factorials(int(n.max())), np.arange(int(n.max()) + 1)
    flat_b, flat_n = better.ravel()[:, None], n.ravel()[:, None]
    inside = (i >= flat_b) & (i <= flat_n)
    terms = logf[flat_n] - logf[i] - logf[np.clip(flat_n - i, 0, None)] - flat_n * math.log(2)
    tails = np.exp(np.where(inside, terms, -np.inf)).sum(axis=1)
    return np.where(flat_n[:, 0] > 0, np.minimum(1.0, tails), 1.0).reshape(n.shape)


def _sign_flip_table(grades: np.ndarray, delta: float, resamples: int, seed: int) -> np.ndarray:
    """The permutation table: `grades` (jobs x samples, higher better, nan left out pairwise), each
    pair's records flipped together. FLIPS draws first; a pair whose observed lead no draw reached
    (its p at the floor) gets the rest of `resamples`, which is all its p can be below the floor."""
    jobs = grades.shape[0]
    first, second = np.triu_indices(jobs, k=1)
    both = ~(np.isnan(grades[first]) | np.isnan(grades[second]))
    diffs = np.where(both, np.nan_to_num(grades[first]) - np.nan_to_num(grades[second]), 0.0)
    records = both.sum(axis=1)
    observed = np.stack([diffs.sum(axis=1) - delta * records, -diffs.sum(axis=1) - delta * records])
    rng, opening = np.random.default_rng(seed), min(resamples, FLIPS)
    beaten, drawn = _flips_reaching(diffs, both, observed, delta, rng, opening), np.full(observed.shape, opening)
    floor = beaten == 0
    columns = np.flatnonzero(floor.any(axis=0))
    if resamples > opening and columns.size:
        more = _flips_reaching(diffs[columns], both[columns], observed[:, columns], delta, rng, resamples - opening)
        beaten[:, columns] += np.where(floor[:, columns], more, 0)
        drawn[:, columns] = np.where(floor[:, columns], resamples, opening)
    p = np.where(records > 0, (1 + beaten) / (drawn + 1), 1.0)
    table = np.ones((jobs, jobs))
    table[first, second], table[second, first] = p[0], p[1]
    return table


def _flips_reaching(diffs: np.ndarray, both: np.ndarray, observed: np.ndarray, delta: float,
                    rng: np.random.Generator, draws: int) -> np.ndarray:
    """How many of `draws` sign flips reach each pair's observed sum, each way ([0]: k over j,
    [1]: j over k). A flip's sum of (k - j - delta) over the pair's records is S.d - delta S.m, with
    d its differences and m its records, so one product serves both directions."""
    samples = diffs.shape[1]
    masks, which = np.unique(both, axis=0, return_inverse=True)  # usually one: every pair, every record
    tolerance = 1e-12 * np.maximum(both.sum(axis=1), 1)
    reached, done = np.zeros(observed.shape), 0
    block = max(1, min(draws, 2**22 // max(samples, 1)))
    while done < draws:
        signs = rng.choice((-1.0, 1.0), size=(min(block, draws - done), samples))
        flipped, shift = signs @ diffs.T, delta * (signs @ masks.T.astype(np.float64))[:, which.ravel()]
        reached += [np.sum(flipped - shift >= observed[0] - tolerance, axis=0),
                    np.sum(-flipped - shift >= observed[1] - tolerance, axis=0)]
        done += signs.shape[0]
    return reached


def _bootstrap_table(arrays: list[np.ndarray], reduce: Callable[..., Optional[float]], up: float, delta: float,
                     resamples: int, seed: int, pooled: Optional[Callable[[np.ndarray], np.ndarray]] = None
                     ) -> np.ndarray:
    """The paired bootstrap table: each job's metric on each resample of the records (the same
    indices for all, drawn as bootstrap_p draws them), [k, j] the share of resamples in which k's
    lead over j is at most delta or undefined (nan: the metric does not apply). BOOTSTRAPS draws
    first; then, for each job j that some k never fell behind (that pair's p at the floor), the pair
    with the largest lead among those gets the rest of `resamples`: a job's stop needs one such pair,
    and each draw costs one metric evaluation per job drawn."""
    jobs, size = len(arrays), arrays[0].shape[0]
    if size == 0:
        return np.ones((jobs, jobs))
    stacked = np.stack([np.asarray(array).T for array in arrays])  # jobs x sources x samples
    rng, opening = np.random.default_rng(seed), min(resamples, BOOTSTRAPS)
    values = _metric_draws(stacked, reduce, rng, opening, pooled)
    behind, drawn = _behind(values, up, delta), np.full((jobs, jobs), opening)
    floor = (behind == 0) & ~np.eye(jobs, dtype=bool)
    with np.errstate(invalid="ignore"):
        leads = np.nan_to_num(np.nanmean(up * (values[:, :, None] - values[:, None, :]), axis=0), nan=-np.inf)
    pairs = [(int(np.argmax(np.where(floor[:, j], leads[:, j], -np.inf))), j) for j in range(jobs) if floor[:, j].any()]
    if resamples > opening and pairs:
        refined = sorted({job for pair in pairs for job in pair})
        more = _behind(_metric_draws(stacked[refined], reduce, rng, resamples - opening, pooled), up, delta)
        for k, j in pairs:
            behind[k, j] += more[refined.index(k), refined.index(j)]
            drawn[k, j] = resamples
    table = (1 + behind) / (drawn + 1)
    np.fill_diagonal(table, 1.0)
    return table


def _metric_draws(stacked: np.ndarray, reduce: Callable[..., Optional[float]], rng: np.random.Generator,
                  draws: int, pooled: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> np.ndarray:
    """Each job's metric on each of `draws` resamples of the records (nan where undefined)."""
    size, values = stacked.shape[2], np.empty((draws, stacked.shape[0]))
    if pooled is not None:
        return _pooled_draws(stacked, pooled, rng, draws)
    for row in range(draws):
        drawn = stacked[:, :, rng.integers(0, size, size)]
        for k in range(stacked.shape[0]):
            value = reduce(*drawn[k])
            values[row, k] = math.nan if value is None else value
    return values


def _pooled_draws(stacked: np.ndarray, pooled: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
                  draws: int) -> np.ndarray:
    """_metric_draws of a pooled metric: the same indices, drawn a block of resamples at a time
    (the same random stream), each resample's sums as how often it drew each record times the
    record's values (exactly the row-by-row sums for counts), the metric of every resample at once."""
    sums_of = np.nan_to_num(np.transpose(stacked, (0, 2, 1)), nan=0.0)  # jobs x samples x sources
    values = np.empty((draws, stacked.shape[0]))
    for start, drawn in resampled_counts(rng, stacked.shape[2], draws):
        for k, table in enumerate(sums_of):
            values[start:start + len(drawn), k] = pooled(drawn @ table)
    return values


def _behind(values: np.ndarray, up: float, delta: float) -> np.ndarray:
    """[k, j]: the draws in which k's lead over j is at most delta, or undefined."""
    counts = np.empty((values.shape[1], values.shape[1]))
    for k in range(values.shape[1]):
        leads = up * (values[:, [k]] - values)
        counts[k] = np.sum(np.isnan(leads) | (leads <= delta), axis=0)
    return counts
