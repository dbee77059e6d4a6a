"""Where one rank's step goes: each instant of it gets one label, first match wins.

``comm_hidden`` (communication while compute runs), ``compute``, ``comm_exposed``, ``other``
(device work that is neither), ``data`` (inside a data-loading range), ``host`` (nothing of the
above: the device idles while the host runs Python, launches or sleeps). The labels' lengths
sum to the step. Done where a rank's trace is read, so that only these parts, the step's exposed
communication and its longest host gap leave that worker (docs/diagnose.md, "Definitions").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from aorta_core.api.intervals import inside

#: The parts of a step, in label order; they sum to ``step_ms``. ``comm_wait_ms`` is a part of
#: ``comm_exposed_ms``.
PARTS = ("compute", "comm_hidden", "comm_exposed", "host", "data", "other")
#: A rank's intervals, by what runs in them.
INTERVALS = ("compute", "comm", "other", "data")


@dataclass
class StepParts:
    """One step of a rank, broken down where its trace is read (the step threads' events and
    the rank's intervals never leave that worker)."""

    #: The parts, ms; ``comm_exposed`` includes the waiting, which needs every rank.
    parts: dict[str, float]
    #: The step's exposed communication (merged, µs): the parent finds the waiting in it.
    exposed: np.ndarray
    #: The longest run of host time: (ms, the event that starts right after it).
    longest_host: tuple[float, str | None]
    #: The parts of the step outside its collectives, per gap: before the first collective
    #: that starts in the step, between each and the next, after the last (the what-if
    #: replays the step from them: :mod:`~aorta_core.reports.what_if`).
    gaps: list[dict[str, float]] = field(default_factory=list)


def break_down(intervals: Mapping[str, np.ndarray], a: float, b: float, starts: np.ndarray,
               names: list[str], collectives: list[tuple[float, float]]) -> StepParts:
    """The step ``[a, b)`` of a rank whose merged :data:`INTERVALS` are ``intervals``;
    ``starts`` and ``names``: the events on its step threads, by start, to name what comes
    right after its longest host gap; ``collectives``: (start, end) of those that start in
    the step, by start."""
    points, lengths, labels = _segments(intervals, a, b)
    cuts = [a]
    for start, end in collectives:  # a gap ends where the next collective starts
        cuts += [max(cuts[-1], start), max(cuts[-1], end)]
    cuts.append(max(cuts[-1], b))
    return StepParts(_parts(lengths, labels), _runs(points, labels["comm_exposed"]),
                     _longest(points, labels["host"], starts, names),
                     [_parts(*_segments(intervals, lo, hi)[1:])
                      for lo, hi in zip(cuts[::2], cuts[1::2], strict=True)])


def _parts(lengths: np.ndarray, labels: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {k: float(lengths[labels[k]].sum()) / 1e3 for k in PARTS}


def _clip(intervals: np.ndarray, a: float, b: float) -> np.ndarray:
    if intervals.shape[1] == 0:
        return intervals
    lo = np.searchsorted(intervals[1], a, side="right")
    hi = np.searchsorted(intervals[0], b, side="left")
    part = intervals[:, lo:hi].copy()
    if part.shape[1]:
        part[0, 0] = max(part[0, 0], a)
        part[1, -1] = min(part[1, -1], b)
    return part


def _segments(intervals: Mapping[str, np.ndarray], a: float, b: float
              ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``[a, b)`` cut where any interval starts or ends: the cut points, the segments' lengths
    and each part's segments (one label each, first match wins)."""
    sets = {k: _clip(intervals[k], a, b) for k in INTERVALS}
    points = np.unique(np.concatenate([[a, b], *(s.ravel() for s in sets.values())]))
    lengths = np.diff(points)
    mids = (points[:-1] + points[1:]) / 2
    p, m, o, d = (inside(sets[k], mids) for k in INTERVALS)
    labels = {"comm_hidden": m & p, "compute": p & ~m, "comm_exposed": m & ~p,
              "other": o & ~m & ~p}
    labels["data"] = d & ~m & ~p & ~o
    labels["host"] = ~(m | p | o | d)
    return points, lengths, labels


def _runs(points: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """The runs of consecutive ``segments`` (between ``points``) as merged intervals."""
    edges = np.flatnonzero(np.diff(np.r_[0, segments.astype(np.int8), 0])).reshape(-1, 2)
    return np.vstack((points[edges[:, 0]], points[edges[:, 1]]))


def _longest(points: np.ndarray, host: np.ndarray, starts: np.ndarray, names: list[str]
             ) -> tuple[float, str | None]:
    """The longest run of consecutive host segments, and the first event starting at its end."""
    runs = _runs(points, host)
    if not runs.shape[1]:
        return 0.0, None
    lengths = runs[1] - runs[0]
    best = int(np.argmax(lengths))
    end = runs[1, best]
    i = int(np.searchsorted(starts, end - 1.0))  # an event starting within 1 µs
    name = names[i] if i < len(names) and starts[i] <= end + 1000 else None
    return float(lengths[best]) / 1e3, name
