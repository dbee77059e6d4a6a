"""Where each rank is on one clock: every rank's clock mapped onto the lowest rank's, from the
collectives they share, each mapping with the bound it is good to.

Ranks on other hosts stamp their traces with their own clocks, which differ by an offset and
drift apart. The fact to align them by: a collective of every rank (all-reduce, all-gather,
reduce-scatter, all-to-all, barrier) ends on no rank before it has started on all of them, so on
the common clock each rank's range of it overlaps the reference rank's range of it
(:func:`~aorta_core.reports.collectives.matched` pairs the ranges). Rank ``r``'s Unix time ``t``
lands on the reference's at ``t + offset + drift (t - about)``. The ranges allow a set of
(offset, drift), the drift held within :data:`DRIFT_LIMIT_PPM`; the drift taken is the middle of
the drifts they allow, the offset the middle of the offsets they allow at that drift (as the
timeline's clock check takes the middle of its interval); where the clocks as they are already
make every pair overlap (ranks of one host, hosts whose clocks agree that well), they are kept:
moving them would be a guess the collectives do not call for. The bound is how far the farthest of
the allowed mappings lies from the one taken, anywhere in the span of the collectives used: the
true mapping is one of them. It is as narrow as the shortest ranges are: on GPUs, where a
collective kernel of the last rank to arrive is short, tens of µs; on a loaded CPU host's gloo
ranks, hundreds of µs to ms (tests/reports/test_rank_alignment.py). Over a trace of a second or
two, a drift of 100 ppm moves a rank less than its ranges are wide: the drift found is then 0 and
the bound allows for the limit.

Why not a robust fit of the ends (Theil-Sen), which presumes that the ends coincide: a gloo rank
stamps a collective's end when its worker thread runs again, and on a loaded host that is late by
up to tens of ms. On untouched same-host traces of the benchmark (2 CPU cores, DDP, 38 shared
all-reduces over 1.2 s) the ends of rank 1 lay up to 16 ms from Theil-Sen's line, whose drift was
13,693 ppm; with 4 ranks the median end of rank 1 was 5.4 ms early. The ranges hold there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from aorta_core.reports.collectives import Collective, matched
from aorta_core.reports.rank_traces import RankTrace

#: How far one host's clock may run from another's: quartz oscillators are specified to within
#: 20-100 ppm each. It keeps a drift that a short trace cannot resolve from taking any value.
DRIFT_LIMIT_PPM = 200.0
#: Collectives that end nowhere before they start everywhere (a broadcast's root may be done
#: before the others start; a c10d op only enqueues its collective).
_EVERY_RANK = ("allreduce", "allgather", "reducescatter", "alltoall", "barrier")
#: Slices of time a fit keeps the tightest pairs of ranges of (:func:`_tightest`).
_BINS = 1000


@dataclass(frozen=True)
class RankClock:
    """Rank ``r``'s clock on the reference rank's: Unix µs ``t`` of rank ``r`` lands at
    :meth:`place` ``(t)``, within ``bound_us`` over the span of the collectives used."""

    offset_us: float
    drift_ppm: float
    bound_us: float
    collectives: int
    method: str
    #: The rank's Unix time, µs, at which ``offset_us`` holds (the median end it was fitted on).
    about_us: float

    def place(self, t_us: float) -> float:
        """Rank time ``t_us`` (Unix µs) on the reference rank's clock."""
        return t_us + self.offset_us + self.drift_ppm * 1e-6 * (t_us - self.about_us)


def _every_rank(name: str) -> bool:
    plain = name.lower().replace("_", "")
    return not name.startswith("c10d::") and any(kind in plain for kind in _EVERY_RANK)


def align_ranks(traces: Mapping[int, RankTrace]) -> dict[int, RankClock | str]:
    """Every rank's clock on the lowest rank's; a rank that shares no collective with it, or
    whose collectives' ranges no mapping can make overlap, gets the reason instead."""
    if not traces:
        return {}
    reference = min(traces)
    out: dict[int, RankClock | str] = {reference: RankClock(
        0.0, 0.0, 0.0, 0, "reference rank", traces[reference].base_ns / 1e3)}
    for rank in sorted(traces.keys() - {reference}):
        pair = {reference: traces[reference], rank: traces[rank]}
        steps = sorted(set(pair[reference].steps) & set(pair[rank].steps))
        shared = [c for c in matched(pair, steps) if _every_rank(c.name)]
        out[rank] = _fit(shared, pair, reference, rank) if shared else (
            f"rank {rank} shares no collective with rank {reference} in the steps both "
            "profiled; left on its own clock")
    return out


def _tightest(ref: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 x`` :data:`_BINS` pairs of ranges: where there are more, in each of that
    many slices of time the pair that bounds the offset most from below and the one that bounds
    it most from above. The rest allow more than these (at the drift of the fit; within a
    slice, the limit drift moves them by less than its width times 200 ppm), so leaving them out
    can only widen the bound, never move the truth outside it; and a linear program of 2 x 100k
    rows took 9 s."""
    if len(own) <= 2 * _BINS:
        return ref, own
    ends = own[:, 1]
    slices = np.minimum(((ends - ends.min()) / (np.ptp(ends) or 1.0) * _BINS).astype(int),
                        _BINS - 1)
    below, above = ref[:, 0] - own[:, 1], ref[:, 1] - own[:, 0]
    keep = set()
    for values in (-below, above):  # the largest lower limit, the smallest upper one
        order = np.lexsort((values, slices))
        firsts = np.flatnonzero(np.r_[True, np.diff(slices[order]) != 0])
        keep.update(order[firsts].tolist())
    kept = np.array(sorted(keep))
    return ref[kept], own[kept]


def _fit(shared: list[Collective], pair: Mapping[int, RankTrace], reference: int, rank: int
         ) -> RankClock | str:
    """The middle of the mappings that make every pair of ranges overlap, and its bound. Times
    count from the rank's median end (``about``) on the rank's trace clock; the reference's are
    moved onto that clock by the gap between the two traces' bases (their times are Unix time
    less the base, which need not be one). Every bound is a linear program of two unknowns
    (scipy's HiGHS): the drifts allowed, then the mappings allowed at each end of the span."""
    from scipy.optimize import linprog  # 0.4 s to import: only where ranks are fitted

    gap_us = (pair[reference].base_ns - pair[rank].base_ns) / 1e3
    ref = np.array([c.spans[reference] for c in shared]) + gap_us
    own = np.array([c.spans[rank] for c in shared])
    ref, own = _tightest(ref, own)
    about = float(np.median(own[:, 1]))
    ref, own = ref - about, own - about
    (ref_start, ref_end), (start, end) = ref.T, own.T
    # rank end mapped >= reference start; rank start mapped <= reference end; in (offset, drift)
    ranges = np.vstack([np.c_[-np.ones(len(end)), -1e-6 * end],
                        np.c_[np.ones(len(start)), 1e-6 * start]])
    room = np.r_[end - ref_start, ref_end - start]
    limit = DRIFT_LIMIT_PPM if len(shared) > 1 else 0.0

    def least(objective: list[float]) -> float | None:
        """The least of ``objective`` . (offset, drift) over the mappings allowed; ``None``
        where none is."""
        done = linprog(objective, A_ub=ranges, b_ub=room, bounds=[(None, None), (-limit, limit)])
        return done.fun if done.status == 0 else None

    lowest = least([0, 1])
    if lowest is None:
        return (f"rank {rank}: no clock mapping within {DRIFT_LIMIT_PPM:g} ppm makes its "
                f"{len(shared)} shared collective(s) overlap rank {reference}'s; left on its "
                "own clock")
    if np.all(room >= 0):  # the clocks as they are make every pair overlap: keep them
        drift_ppm, offset = 0.0, 0.0
    else:
        drift_ppm = (lowest - least([0, -1])) / 2
        offset = (np.max(ref_start - end - 1e-6 * drift_ppm * end)
                  + np.min(ref_end - start - 1e-6 * drift_ppm * start)) / 2
    bound = 0.0
    for t in (start.min(), end.max()):  # a linear error is largest at an end of the span
        at = offset + 1e-6 * drift_ppm * t
        bound = max(bound, at - least([1, 1e-6 * t]), -least([-1, -1e-6 * t]) - at)
    if offset == drift_ppm == 0.0:
        how = (f"collectives: the clocks as they are make the ranges of {len(shared)} shared "
               "collective(s) overlap; kept")
    elif limit:
        how = (f"collectives: the middle of the drifts (within {DRIFT_LIMIT_PPM:g} ppm), then of "
               f"the offsets, that the ranges of {len(shared)} shared collectives allow")
    else:
        how = ("collectives: the middle of the offsets that the ranges of 1 shared collective "
               "allow; offset only (a drift needs two)")
    return RankClock(float(offset), float(drift_ppm), float(bound), len(shared), how,
                     pair[rank].base_ns / 1e3 + about)
