"""The statistics of ``aorta compare`` (reports/significance.py) against independent
computations: p by enumerating every split of the pooled trials, medians by numpy,
Benjamini–Hochberg by its definition; degenerate input gives a clear result and no warning."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from pytest import approx

from aorta_core.reports.significance import compare_rows, inconclusive, min_trials, q_values


def _exact_p(x: list[float], y: list[float]) -> float:
    """Two-sided permutation p of the U statistic (midranks), every split enumerated: twice the
    smaller tail (scipy's definition; with ties the null distribution is not symmetric)."""
    pooled = x + y
    order = sorted(pooled)
    rank = {v: (order.index(v) + 1 + len(order) - order[::-1].index(v)) / 2 for v in pooled}

    def u(idx: tuple[int, ...]) -> float:
        return sum(rank[pooled[i]] for i in idx) - len(x) * (len(x) + 1) / 2

    seen = u(tuple(range(len(x))))
    null = [u(s) for s in itertools.combinations(range(len(pooled)), len(x))]
    low = sum(v <= seen + 1e-9 for v in null) / len(null)
    high = sum(v >= seen - 1e-9 for v in null) / len(null)
    return min(1.0, 2 * min(low, high))


def _bh(p: list[float]) -> list[float]:
    """Benjamini–Hochberg by its definition: q_i = min over p_j ≥ p_i of p_j m / rank_j."""
    m, ranked = len(p), sorted(p)
    return [min(1.0, min(pj * m / (r + 1) for r, pj in enumerate(ranked) if pj >= pi))
            for pi in p]


@pytest.mark.parametrize("alpha", [0.2, 0.1, 0.05, 0.01, 0.001])
def test_min_trials_is_where_the_most_extreme_split_reaches_alpha(alpha):
    n = min_trials(alpha)
    apart = [float(i) for i in range(2 * n)]
    assert _exact_p(apart[:n], apart[n:]) <= alpha
    if n > 1:
        assert _exact_p(apart[:n - 1], apart[n - 1:2 * n - 2]) > alpha
    assert min_trials(0.05) == 4 and inconclusive(0.05) == "inconclusive: needs ≥ 4 trials per side"


def test_p_matches_the_enumeration_with_and_without_ties():
    rng = np.random.default_rng(7)
    base, cand = [], []
    for n_x, n_y in [(4, 4), (5, 4), (6, 6), (4, 7)]:
        for _ in range(6):
            base.append(rng.normal(10, 1, n_x).round(1).tolist())   # ties now and then
            cand.append(rng.normal(10.8, 1, n_y).round(1).tolist())
    base.append([1.0, 1.0, 2.0, 2.0])  # ties across the sides
    cand.append([2.0, 2.0, 3.0, 3.0])
    stats = compare_rows(base, cand)
    for x, y, s in zip(base, cand, stats, strict=True):
        assert s.p == approx(_exact_p(x, y), abs=1e-9), (x, y)
        assert s.delta == approx(np.median(y) - np.median(x))
        assert s.ci_low <= s.ci_high


def test_q_is_benjamini_hochberg_within_each_family():
    rng = np.random.default_rng(3)
    base = [rng.normal(10, 1, 6).tolist() for _ in range(12)]
    cand = [(rng.normal(10, 1, 6) + 2 * (i % 3 == 0)).tolist() for i in range(12)]
    families = ["a"] * 5 + ["b"] * 7
    stats = compare_rows(base, cand, 0.05, families)
    for fam in ("a", "b"):
        idx = [i for i, f in enumerate(families) if f == fam]
        assert [stats[i].q for i in idx] == approx(_bh([stats[i].p for i in idx]))
    assert all(s.significant == (s.q <= 0.05) for s in stats)
    assert q_values([0.01, None, 0.04]) == [approx(0.02), None, approx(0.04)]


def test_rows_are_tested_alike_alone_or_together():
    """Grouped by trial counts, a row's p does not depend on the rows beside it, and the same
    inputs give the same interval."""
    rng = np.random.default_rng(5)
    base = [rng.normal(5, 1, n).tolist() for n in (4, 5, 6, 4, 10)]
    cand = [rng.normal(6, 1, n).tolist() for n in (4, 5, 6, 5, 10)]
    together = compare_rows(base, cand)
    for i in range(len(base)):
        alone = compare_rows(base[i:i + 1], cand[i:i + 1])[0]
        assert alone.p == approx(together[i].p)
    assert compare_rows(base, cand) == together


def test_degenerate_rows_give_a_clear_result_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same, moved, few, empty, bad, tied_big = compare_rows(
            [[3.0] * 5, [1.0] * 5, [1.0, 2.0, 3.0], [], [1.0, math.nan, math.inf, 2.0, 3.0],
             [1.0] * 30 + [2.0] * 30],
            [[3.0] * 5, [2.0] * 5, [4.0, 5.0, 6.0], [1.0, 2.0], [4.0, 5.0, 6.0, 7.0],
             [1.0] * 30 + [2.0] * 30])
    assert (same.p, same.delta, same.ci_low, same.ci_high, same.significant) == (
        1.0, 0.0, 0.0, 0.0, False)
    assert moved.p == approx(2 / math.comb(10, 5)) and moved.significant  # all apart
    assert (few.p, few.q, few.delta, few.untested) == (None, None, 3.0, inconclusive(0.05))
    assert (empty.p, empty.delta, empty.untested) == (None, None, "a side has no finite value")
    # nan and inf are left out: 3 finite trials remain on the baseline's side
    assert (bad.p, bad.delta, bad.untested) == (None, 3.5, inconclusive(0.05))
    assert tied_big.p == approx(1.0) and not tied_big.significant
    assert compare_rows([], []) == []
    with pytest.raises(ValueError, match="1 baseline rows against 0 candidate rows"):
        compare_rows([[1.0]], [])
