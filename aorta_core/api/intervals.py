"""The one interval union of aorta: the benchmark's stream overlap, torchprof's HTA overlap, the
diagnosis and the timeline's windows all merge intervals here.

Merging follows HolisticTraceAnalysis's ``merge_kernel_intervals``: sorted by start, a new
interval begins where a start is past every end before it, so overlapping and touching intervals
join. Two forms of that one rule: :func:`merge` on numpy columns (the diagnosis holds its events
as columns), :func:`merged` on ``(start, end)`` pairs in plain Python, which a parser's workers
use without importing numpy (its import is 45 ms, 0.3 s where bytecode is not cached: more than
a small trace's whole parse; on a 59k-kernel lane the pairs take as long as the columns did).
:func:`inside` asks which points lie in merged intervals (the diagnosis labels time with it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def merge(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The union of ``[start, end)`` as a ``[2, k]`` array of disjoint intervals by start."""
    import numpy as np

    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    if start.size == 0:
        return np.empty((2, 0))
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    first = np.flatnonzero(np.r_[True, start[1:] > np.maximum.accumulate(end)[:-1]])
    return np.vstack((start[first], np.maximum.reduceat(end, first)))


def inside(intervals: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Which of the points ``x`` lie in :func:`merge`'s ``intervals`` (half-open), in log time
    each."""
    import numpy as np

    if intervals.shape[1] == 0:
        return np.zeros(x.shape, dtype=bool)
    i = np.searchsorted(intervals[0], x, side="right") - 1
    ok = i >= 0
    return ok & (x < intervals[1][np.clip(i, 0, None)])


def covered(intervals: np.ndarray) -> float:
    """Total length of :func:`merge`'s intervals (exactly rounded: no summation order shows)."""
    return math.fsum((intervals[1] - intervals[0]).tolist())


def merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``(start, end)`` pairs as sorted disjoint pairs (:func:`merge`'s rule)."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def total_length(pairs: Iterable[tuple[float, float]]) -> float:
    """Total length of disjoint pairs (:func:`merged`'s), exactly rounded as :func:`covered`."""
    return math.fsum(end - start for start, end in pairs)


def union_length(starts: Sequence[float], ends: Sequence[float]) -> float:
    """Total length of the union of the intervals ``[start, end)``."""
    return total_length(merged(zip(starts, ends, strict=True)))
