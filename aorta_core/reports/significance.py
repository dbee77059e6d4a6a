"""Welch's t-test (two-sided) for the comparison: scipy's when installed, else our own.

Welch rather than Mann-Whitney U: with 3 trials per side the exact U test cannot go below
p = 0.1, so it could never call a change significant at the usual 0.05; Welch's test can, and
it does not assume equal variances. The fallback computes the Student t tail through the
regularized incomplete beta function (continued fraction, modified Lentz).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Fewer passing trials than this on either side and nothing is tested: the output says
#: :data:`TOO_FEW` instead of a p-value. Welch's test estimates each side's variance; from 2
#: trials that estimate has one degree of freedom, the test's own degrees of freedom fall to
#: 1-2, and its p swings with any one trial (one pair of runs read +307 % "significant,
#: p = 0.044" and -77 % "not significant"). From 3 the test has at least 2 degrees of freedom
#: and holds its level under normal noise, with little power. A test that replaces Welch's
#: states its own minimum here (an exact permutation test cannot reach p < 0.1 at 3 a side).
MIN_TRIALS_PER_SIDE = 3
#: What the outputs say where a side has fewer than :data:`MIN_TRIALS_PER_SIDE` trials.
TOO_FEW = f"too few trials to test (needs ≥ {MIN_TRIALS_PER_SIDE} per side)"


def testable(n_a: int, n_b: int) -> bool:
    """Whether sides of ``n_a`` and ``n_b`` passing trials are enough to test."""
    return min(n_a, n_b) >= MIN_TRIALS_PER_SIDE


def implementation() -> str:
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        return "Welch t-test (pure Python)"
    return "Welch t-test (scipy)"


def _betacf(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(xs) / len(xs)
    return mean, math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def welch_pure(a: Sequence[float], b: Sequence[float]) -> float:
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    return _welch_stats(ma, va, len(a), mb, vb, len(b))


def _welch_stats(ma: float, va: float, na: int, mb: float, vb: float, nb: int) -> float:
    """The test from each side's mean, sample variance and count (pure Python)."""
    sa, sb = va / na, vb / nb
    if sa + sb == 0.0:
        return 1.0 if ma == mb else 0.0
    t = (ma - mb) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa**2 / (na - 1) + sb**2 / (nb - 1))
    return t_two_sided(t, df)


def welch_p_stats(a: tuple[float, float, int], b: tuple[float, float, int]) -> float | None:
    """:func:`welch_p` from each side's (mean, sample std, n), as matrix.json's
    ``metrics_summary`` keeps them (the same number as from the values); ``None`` when a side
    has fewer than 2 values or a number is missing or overflows."""
    if any(v is None for v in (*a, *b)) or a[2] < 2 or b[2] < 2:
        return None
    try:
        return _welch_stats(a[0], a[1] ** 2, a[2], b[0], b[1] ** 2, b[2])
    except (OverflowError, ZeroDivisionError, ValueError):
        return None


def welch_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided p-value of equal means; ``None`` when a side has fewer than 2 values, or
    values so large (near 1.8e308: an edited or damaged record) that their variance overflows."""
    if len(a) < 2 or len(b) < 2:
        return None
    try:
        return _welch(a, b)
    except OverflowError:
        return None


def _welch(a: Sequence[float], b: Sequence[float]) -> float:
    try:
        from scipy.stats import ttest_ind
    except ImportError:
        return welch_pure(a, b)
    if _mean_var(a)[1] + _mean_var(b)[1] == 0.0:  # scipy gives nan here
        return welch_pure(a, b)
    return float(ttest_ind(a, b, equal_var=False).pvalue)
