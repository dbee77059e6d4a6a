"""The statistics of a comparison, from scipy.stats, many rows at once.

Each row is two samples of per-trial values (baseline, candidate). Its effect is the difference
of medians (candidate − baseline) with a seeded percentile bootstrap interval; its p is the
two-sided Mann–Whitney U test (rank-based: one slow trial does not swing it, and it assumes no
normal noise); its q is the Benjamini–Hochberg adjusted p over the row's family (the rows tested
together), so that 300 kernels tested at once do not yield 15 false alarms at alpha 0.05.

The U test is exact where that is affordable: scipy's exact distribution for samples without
ties (one side ≤ 8 trials), an exact permutation over every split for small samples with ties,
the normal approximation (tie-corrected) beyond. The exact test has a floor: with n trials a
side its p cannot go below 2 / C(2n, n) (0.1 at 3 a side), so below :func:`min_trials` a row is
"inconclusive", never "not significant".

Rows are grouped by their trial counts and each group goes through scipy along ``axis=1`` in one
call: 1,500 rows × 10 trials take a fraction of a second (docs/reports.md gives the time).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

#: Bootstrap resamples per row: the interval is their 2.5th and 97.5th percentiles; 1,000
#: keeps 1,500 rows × 10 trials near a third of a second.
N_RESAMPLES = 1000
CONFIDENCE = 0.95
#: The bootstrap's seed: the same inputs give the same interval, run after run.
SEED = 20240042
#: Small samples with ties are tested by enumerating every split up to this many.
MAX_EXACT_SPLITS = 20_000
TEST_NAME = "Mann–Whitney U (two-sided), Benjamini–Hochberg q, bootstrap CI of Δ median"


@dataclass(frozen=True)
class RowStats:
    """One row's statistics; ``p``, ``q``, the interval ``None`` where the row was not tested
    (``untested`` says why)."""

    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    q: float | None
    significant: bool
    untested: str = ""


@cache
def min_trials(alpha: float) -> int:
    """The fewest trials per side at which the exact two-sided test can reach p ≤ ``alpha``:
    the smallest n with 2 / C(2n, n) ≤ alpha (the most extreme split, both tails)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha!r}: expected a significance level between 0 and 1")
    n = 1
    while 2 / math.comb(2 * n, n) > alpha:
        n += 1
    return n


def inconclusive(alpha: float) -> str:
    """What a row says where a side has fewer than :func:`min_trials` trials."""
    return f"inconclusive: needs ≥ {min_trials(alpha)} trials per side"


def testable(n_a: int, n_b: int, alpha: float) -> bool:
    return min(n_a, n_b) >= min_trials(alpha)


def _finite(values: Sequence[float]) -> np.ndarray:
    a = np.asarray(values, dtype=float).ravel()
    return a[np.isfinite(a)]


def _has_ties(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    both = np.sort(np.concatenate([x, y], axis=1), axis=1)
    return (np.diff(both, axis=1) == 0).any(axis=1)


def _u_test(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Two-sided U p-values of the rows of ``x`` against those of ``y`` (one trial count).

    A row's p depends only on its ranks: scipy tests one row of each distinct rank pattern
    (without ties the U statistic alone) and the others take its p, so 1,500 rows cost a few
    dozen exact tests."""
    from scipy.stats import PermutationMethod, mannwhitneyu, rankdata

    n_x, n_y = x.shape[1], y.shape[1]
    ranks = rankdata(np.concatenate([x, y], axis=1), axis=1)
    ties = _has_ties(x, y)
    u = ranks[:, :n_x].sum(axis=1)
    p = np.empty(len(x))
    for tied in (False, True):
        rows = np.flatnonzero(ties == tied)
        if not len(rows):
            continue
        if not tied:
            method = "auto"  # exact when a side has ≤ 8 trials, asymptotic beyond
            keys = u[rows, None]
        else:
            method = (PermutationMethod(n_resamples=MAX_EXACT_SPLITS)  # every split: exact
                      if math.comb(n_x + n_y, n_x) <= MAX_EXACT_SPLITS else "asymptotic")
            keys = np.concatenate([np.sort(ranks[rows, :n_x], axis=1),
                                   np.sort(ranks[rows, n_x:], axis=1)], axis=1)
        _, first, back = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        pick = rows[first]
        p[rows] = mannwhitneyu(x[pick], y[pick], axis=1, method=method).pvalue[back.ravel()]
    # All values equal: nothing tells the sides apart (the normal approximation gives nan).
    same = np.ptp(np.concatenate([x, y], axis=1), axis=1) == 0
    p[same | np.isnan(p)] = 1.0
    return np.clip(p, 0.0, 1.0)


def _median(a: np.ndarray) -> np.ndarray:
    """The median along the last axis, by a sort (numpy's median is several times slower on
    the bootstrap's many short rows); values near the float limit overflow to ±inf quietly."""
    a = np.sort(a, axis=-1)
    n = a.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        return (a[..., (n - 1) // 2] + a[..., n // 2]) / 2


def _delta(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return _median(np.moveaxis(y, axis, -1)) - _median(np.moveaxis(x, axis, -1))


def _intervals(x: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the difference of medians, row by row (seeded)."""
    from scipy.stats import bootstrap

    ci = bootstrap((x, y), _delta, n_resamples=N_RESAMPLES, vectorized=True, axis=1,
                   confidence_level=CONFIDENCE, method="percentile",
                   rng=np.random.default_rng(seed), batch=max(1, 4_000_000 // x.size)
                   ).confidence_interval
    return np.asarray(ci.low, dtype=float), np.asarray(ci.high, dtype=float)


def _number(value: float) -> float | None:
    """A finite float, else ``None`` (values near the float limit overflow their medians)."""
    return float(value) if math.isfinite(value) else None


def q_values(p: Sequence[float | None], families: Sequence[Hashable] | None = None
             ) -> list[float | None]:
    """Benjamini–Hochberg q-values of ``p`` within each family (``None`` stays ``None``)."""
    from scipy.stats import false_discovery_control

    families = families if families is not None else [None] * len(p)
    out: list[float | None] = [None] * len(p)
    groups: dict[Hashable, list[int]] = {}
    for i, (pi, fam) in enumerate(zip(p, families, strict=True)):
        if pi is not None:
            groups.setdefault(fam, []).append(i)
    for idx in groups.values():
        q = false_discovery_control(np.array([p[i] for i in idx], dtype=float), method="bh")
        for i, qi in zip(idx, q, strict=True):
            out[i] = float(qi)
    return out


def compare_rows(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]],
                 alpha: float = 0.05, families: Sequence[Hashable] | None = None,
                 seed: int = SEED) -> list[RowStats]:
    """The statistics of each row (``baseline[i]`` against ``candidate[i]``); q-values within
    each of ``families`` (one label per row; ``None``: all rows are one family). Non-finite
    values are left out; a row with a side below :func:`min_trials` is not tested."""
    if len(baseline) != len(candidate):
        raise ValueError(f"{len(baseline)} baseline rows against {len(candidate)} candidate rows")
    need = min_trials(alpha)
    xs, ys = [_finite(r) for r in baseline], [_finite(r) for r in candidate]
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if min(len(x), len(y)) >= need:
            groups.setdefault((len(x), len(y)), []).append(i)
    p: list[float | None] = [None] * len(xs)
    low: list[float | None] = [None] * len(xs)
    high: list[float | None] = [None] * len(xs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # scipy's degenerate-data notes: handled above
        for (n_x, _), idx in groups.items():
            x, y = np.stack([xs[i] for i in idx]), np.stack([ys[i] for i in idx])
            ps = _u_test(x, y)
            lo, hi = _intervals(x, y, seed + n_x)
            for k, i in enumerate(idx):
                p[i], low[i], high[i] = float(ps[k]), _number(lo[k]), _number(hi[k])
    q = q_values(p, families)
    out = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        delta = _number(_median(y) - _median(x)) if len(x) and len(y) else None
        if p[i] is None:
            why = inconclusive(alpha) if len(x) and len(y) else "a side has no finite value"
            out.append(RowStats(delta, None, None, None, None, False, why))
            continue
        out.append(RowStats(delta, low[i], high[i], p[i], q[i], q[i] <= alpha))
    return out


def interval_text(delta: float | None, low: float | None, high: float | None) -> str:
    """A difference with its interval where it was tested (``+1.5 [+1.49, +1.57]``)."""
    if delta is None:
        return "—"
    if low is None or high is None:
        return f"{delta:+.4g}"
    return f"{delta:+.4g} [{low:+.4g}, {high:+.4g}]"
