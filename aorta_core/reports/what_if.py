"""What would the step take without the straggler: the ranks' profiled steps replayed with
their shared collectives as barriers, as measured and with durations changed.

Each rank's step is a chain of its own time and the collectives every rank shares
(:func:`~aorta_core.reports.collectives.matched`): its own time up to the first, the first, its
own time to the next, ..., its own time after the last. A collective ends once its last rank
arrives, plus its transfer: the shortest rank's duration of it (that rank waited for no one).
Own time is what the rank's trace shows between its shared collectives, broken into the step's
parts (:mod:`~aorta_core.reports.step_breakdown`: compute, host, data, ...; a collective that not
every rank ran counts as its own time). The profiled steps run one after another on each rank,
each starting where the rank's last one ended.

Replayed as measured, the chain gives each step's time back (``replayed_step_ms``, the model's
check); replayed with a straggler's excess removed (its host, data and compute time above the
other ranks' median, in each own stretch), or with a part's time on every rank replaced by its
cross-rank median, it gives what the step would take. The prediction is the measured step less
what the replay saves (``recoverable_ms``): the model's own error cancels where both replays
share it. Per step the ranks' median; over steps the median.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aorta_core.reports.collectives import matched
from aorta_core.reports.rank_traces import RankTrace
from aorta_core.reports.step_breakdown import PARTS

#: A straggler's excess, removed where it lies above the other ranks' median.
EXCESS_PARTS = ("host", "data", "compute")
#: The parts whose times the replay also sets to their cross-rank median, one at a time.
OWN_PARTS = ("compute", "host", "data", "other")

#: A rank's own stretches of one step: the parts (ms) of each, in the order of the
#: collectives that end them (the last: after the last collective).
Stretches = list[dict[str, float]]


@dataclass
class _Step:
    """One profiled step: each rank's own stretches and each shared collective's transfer."""

    own: dict[int, Stretches]
    transfer: list[float]


def _step(traces: Mapping[int, RankTrace], step: int) -> _Step:
    """The stretches of each rank in ``step``, cut at the collectives every rank shares."""
    shared = matched(traces, [step])
    keys = {(c.name, c.index) for c in shared}
    own: dict[int, Stretches] = {}
    for rank, trace in traces.items():
        gaps = trace.breakdown[step].gaps
        counts: dict[str, int] = defaultdict(int)
        stretch, stretches = dict(gaps[0]), []
        for (name, _, dur), gap in zip(trace.collectives_in(*trace.steps[step]), gaps[1:],
                                       strict=True):
            if (name, counts[name]) in keys:
                stretches.append(stretch)
                stretch = dict(gap)
            else:  # not every rank's: the rank's own time
                stretch["comm_exposed"] += dur / 1e3
                stretch = {k: stretch[k] + gap[k] for k in PARTS}
            counts[name] += 1
        own[rank] = [*stretches, stretch]
    transfer = [min(b - a for a, b in c.spans.values()) / 1e3 for c in shared]
    return _Step(own, transfer)


def _replay(steps: list[_Step], length: Callable[[int, int, int], float]
            ) -> list[dict[int, float]]:
    """Each step's time per rank (ms) when rank ``r``'s ``j``-th own stretch of step ``i``
    takes ``length(i, r, j)``."""
    ranks = list(steps[0].own)
    clock = dict.fromkeys(ranks, 0.0)
    out = []
    for i, step in enumerate(steps):
        start = dict(clock)
        for j, transfer in enumerate(step.transfer):
            done = max(clock[r] + length(i, r, j) for r in ranks) + transfer
            clock = dict.fromkeys(ranks, done)
        last = len(step.transfer)
        clock = {r: clock[r] + length(i, r, last) for r in ranks}
        out.append({r: clock[r] - start[r] for r in ranks})
    return out


def _median_of_others(steps: list[_Step], rank: int | None, part: str
                      ) -> Callable[[int, int], float]:
    """Per (step, stretch), the median of ``part`` over the ranks other than ``rank``."""
    def median(i: int, j: int) -> float:
        own = steps[i].own
        return statistics.median(own[r][j][part] for r in own if r != rank)
    return median


def _without_excess(steps: list[_Step], ranks: list[int]) -> Callable[[int, int, int], float]:
    """Stretch lengths with each of ``ranks``' excess over the others' median removed."""
    medians = {(rank, part): _median_of_others(steps, rank, part)
               for rank in ranks for part in EXCESS_PARTS}

    def length(i: int, r: int, j: int) -> float:
        stretch = steps[i].own[r][j]
        total = math.fsum(stretch.values())
        if r in ranks:
            total -= sum(max(0.0, stretch[p] - medians[r, p](i, j)) for p in EXCESS_PARTS)
        return total
    return length


def _at_median(steps: list[_Step], part: str) -> Callable[[int, int, int], float]:
    """Stretch lengths with ``part`` on every rank at its cross-rank median."""
    median = _median_of_others(steps, None, part)

    def length(i: int, r: int, j: int) -> float:
        stretch = steps[i].own[r][j]
        return math.fsum(stretch.values()) - stretch[part] + median(i, j)
    return length


def _per_step(times: list[dict[int, float]]) -> list[float]:
    return [statistics.median(t.values()) for t in times]


def _round(value: float) -> float:
    return round(value, 3)


def what_if(traces: Mapping[int, RankTrace], steps: list[int], measured_ms: list[float],
            stragglers: list[int]) -> dict[str, Any] | None:
    """``diagnosis.json``'s ``what_if`` for ``steps`` (consecutive profiled steps every rank
    has), ``measured_ms`` each step's measured time (the ranks' median), ``stragglers`` the
    ranks found slower; ``None`` with fewer than two ranks."""
    if len(traces) < 2 or not steps:
        return None
    chain = [_step(traces, step) for step in steps]
    base = _per_step(_replay(chain, _without_excess(chain, [])))
    step_ms = statistics.median(measured_ms)

    def predicted(length: Callable[[int, int, int], float]) -> dict[str, float]:
        saved = statistics.median(b - c for b, c in zip(
            base, _per_step(_replay(chain, length)), strict=True))
        return {"step_ms": _round(step_ms - saved), "recoverable_ms": _round(saved)}

    every = predicted(_without_excess(chain, stragglers))
    per_op_type = {part: predicted(_at_median(chain, part)) for part in OWN_PARTS}
    return {
        "text": _sentence(step_ms, every["step_ms"], stragglers, per_op_type),
        "step_ms": _round(step_ms), "replayed_step_ms": _round(statistics.median(base)),
        "step_ms_without_stragglers": every["step_ms"],
        "recoverable_ms": every["recoverable_ms"],
        "slowdown": _round(step_ms / every["step_ms"]) if every["step_ms"] > 0 else None,
        "stragglers": stragglers,
        "per_rank": {str(r): predicted(_without_excess(chain, [r])) for r in stragglers},
        "per_op_type": per_op_type,
        "shared_collectives_per_step": _round(statistics.median(len(s.transfer)
                                                                for s in chain)),
    }


def _sentence(step_ms: float, without_ms: float, stragglers: list[int],
              per_op_type: Mapping[str, Mapping[str, float]]) -> str:
    """The what-if in one sentence: the stragglers' excess, else the part whose spread over the
    ranks costs the most."""
    if stragglers:
        whose = (f"rank {stragglers[0]}'s" if len(stragglers) == 1 else "ranks "
                 + ", ".join(map(str, stragglers[:-1])) + f" and {stragglers[-1]}'s")
        return (f"without {whose} excess the step would take {without_ms:.1f} ms instead of "
                f"{step_ms:.1f}")
    part, best = max(per_op_type.items(), key=lambda kv: kv[1]["recoverable_ms"])
    return (f"no straggler; with every rank's {part} time at the ranks' median the step would "
            f"take {best['step_ms']:.1f} ms instead of {step_ms:.1f}")
