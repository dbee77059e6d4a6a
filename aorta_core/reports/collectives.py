"""Which collective on one rank is which on another, without a common clock.

The k-th collective of a name (``gloo:all_reduce``, an NCCL kernel's name) in ``ProfilerStep#N``
is the same collective on every rank that ran it: ranks issue their collectives in one order, and
the step bounds each rank's count. Everything that compares ranks through their collectives
starts here, so that each analysis states the rule once: the waiting for other ranks
(:mod:`~aorta_core.reports.diagnose`) and the ranks' clocks
(:mod:`~aorta_core.reports.rank_alignment`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aorta_core.reports.rank_traces import RankTrace


@dataclass(frozen=True)
class Collective:
    """One collective that several ranks ran: the ``index``-th of its ``name`` in ``step``."""

    name: str
    step: int
    index: int
    #: Each rank's (start, end), µs on that rank's own clock.
    spans: dict[int, tuple[float, float]]


def _in_step(trace: RankTrace, step: int) -> dict[tuple[str, int], tuple[float, float]]:
    """A rank's collectives that start in ``step``, keyed by (name, k-th of that name)."""
    counts: dict[str, int] = defaultdict(int)
    mine = {}
    for name, ts, dur in trace.collectives_in(*trace.steps[step]):
        mine[(name, counts[name])] = (ts, ts + dur)
        counts[name] += 1
    return mine


def matched(traces: Mapping[int, RankTrace], steps: Iterable[int]) -> list[Collective]:
    """The collectives that every rank of ``traces`` ran in each of ``steps`` (which every rank
    profiled), step by step, each in the order the first rank started them. A collective that
    one rank lacks (a pipeline stage's own, or cut by the profiler) is left out: ranks are
    compared only on what they share."""
    out = []
    for step in steps:
        keyed = {rank: _in_step(trace, step) for rank, trace in traces.items()}
        for key in next(iter(keyed.values()), {}):
            if all(key in mine for mine in keyed.values()):
                out.append(Collective(key[0], step, key[1],
                                      {rank: mine[key] for rank, mine in keyed.items()}))
    return out
