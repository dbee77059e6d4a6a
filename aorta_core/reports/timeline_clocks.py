"""``aorta timeline --align``: which clock each rank's events are placed on.

``collectives`` (the default): every rank's host clock mapped onto the lowest rank's by the
collectives they share (:mod:`~aorta_core.reports.rank_alignment`), over what ``host`` does.
``host``: each rank on its own host's clock, as its sources stamp it, each Unix-clock trace
moved as its clock check against the benchmark's iterations says
(:mod:`~aorta_core.reports.clock_check`). ``none``: every source at the times it wrote; the
clock checks are reported, not applied.

The mapping is fitted on the host clocks: each rank's Kineto trace is first placed as its clock
check places it in the timeline (:func:`~aorta_core.reports.clock_check.check_markers` on the
``aorta.iteration#N`` ranges its reader kept), so a rank's events land at their host time mapped
by its :class:`~aorta_core.reports.rank_alignment.RankClock`. A rank whose trace names the
reference rank's host (Kineto's ``host_name``) is on its clock already and is not fitted: there
the collectives could only add their own width to the bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_core.reports.clock_check import check_markers
from aorta_core.reports.timeline_inputs import RankInputs, read_telemetry

if TYPE_CHECKING:  # numpy and the readers load only where ranks are fitted
    from aorta_core.reports.rank_alignment import RankClock
    from aorta_core.reports.rank_traces import RankTrace

#: A rank placed only to within more than this (µs) is named in a warning: cross-rank times
#: closer than its bound are not resolved.
ALIGN_WARN_US = 1000.0


@dataclass
class Placement:
    """The ranks' clock mappings of one timeline, and what ``otherData.rank_alignment`` says."""

    align: str
    #: Per rank: its host clock's mapping onto the reference rank's; a rank not in it stays on
    #: its own host's clock.
    clocks: dict[int, RankClock] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def applies_checks(self) -> bool:
        return self.align != "none"

    def on_one_clock(self, rank: int, unix_us: float) -> float | None:
        """Rank ``rank``'s Unix time (µs) on the reference rank's clock; ``None`` for a rank
        left on its own host's clock."""
        entry = self.entries.get(str(rank))
        if entry is None or "reason" in entry:
            return None
        clock = self.clocks.get(rank)
        return unix_us if clock is None else clock.place(unix_us)

    def bound_us(self, rank: int) -> float:
        """How far :meth:`on_one_clock` may place ``rank`` from the truth."""
        return self.entries.get(str(rank), {}).get("bound_us", 0.0)


def _on_host_clock(trace: RankTrace, inputs: RankInputs, trial: Path) -> None:
    """``trace`` moved as the timeline's clock check moves the file it was read from first."""
    fitted = trial / trace.sources[0]
    declared = next((t.source.error_bound_ms for t in inputs.traces
                     if t.source.path == fitted), None)
    iterations = read_telemetry(inputs.jsonl, lambda _: None) if inputs.jsonl else []
    base = trace.base_ns
    marks = {n: (base + round(a * 1e3), base + round(b * 1e3))
             for n, (a, b) in trace.iterations.items()}
    check = check_markers(marks, iterations, declared, 0, trace.sources[0])
    if check is not None and (check.rate is not None or check.shift_ns):
        trace.rescale(check.rate or 1.0, (check.about_ns - base) / 1e3, check.shift_ns / 1e3)


def place_ranks(align: str, trial: Path, inputs: Mapping[int, RankInputs],
                warn: Callable[[str], None]) -> Placement:
    """Fit every rank's clock (``align="collectives"``, two ranks or more) on its Kineto traces,
    each first moved as its clock check moves it (:func:`fit_clocks`)."""
    if align != "collectives" or len(inputs) < 2:
        return Placement(align)
    from aorta_core.reports.rank_traces import read_ranks

    read = read_ranks({rank: [t.source.path for t in found.traces if t.source.clock == "unix"]
                       for rank, found in inputs.items()}, trial, lambda _: None)
    traces = {rank: trace for rank, trace in read.items() if trace.steps}
    for rank, trace in traces.items():
        _on_host_clock(trace, inputs[rank], trial)
    return fit_clocks(traces, inputs, warn)


def fit_clocks(traces: Mapping[int, RankTrace], ranks: Iterable[int],
               warn: Callable[[str], None]) -> Placement:
    """Every rank of ``ranks`` on the lowest traced rank's clock, from ``traces`` (those with
    profiled steps, on their host clocks); a rank left on its own clock, or placed only within
    more than :data:`ALIGN_WARN_US`, is said in one line."""
    from aorta_core.reports.rank_alignment import RankClock, align_ranks

    placement = Placement("collectives")
    reference = min(traces, default=None)
    one_host = {rank for rank, trace in traces.items() if rank != reference
                and trace.host is not None and trace.host == traces[reference].host}
    others = {rank: trace for rank, trace in traces.items() if rank not in one_host}
    fitted: dict[int, RankClock | str] = align_ranks(others) if len(traces) > 1 else {}
    for rank in one_host:
        fitted[rank] = RankClock(0.0, 0.0, 0.0, 0, f"host: on rank {reference}'s host "
                                 f"({traces[rank].host}), one clock", traces[rank].base_ns / 1e3)
    alone = [r for r, c in fitted.items() if isinstance(c, str) and "shares no collective" in c]
    none_shared = bool(alone) and len(alone) == len(traces) - 1
    if none_shared:  # one line, not one a rank
        warn(f"no rank shares a collective with rank {reference} in the steps both profiled; "
             "each stays on its own host's clock")
    for rank in sorted(ranks):
        clock = fitted.get(rank, f"rank {rank}: no readable Kineto trace with profiled steps "
                                 "to align it by; left on its own host's clock")
        if isinstance(clock, str):
            if fitted and not none_shared:
                warn(clock)  # said where other ranks are aligned; a trial with none is no news
            placement.entries[str(rank)] = {"method": "host", "reason": clock}
            continue
        if clock.collectives:
            placement.clocks[rank] = clock
        placement.entries[str(rank)] = {
            "offset_us": round(clock.offset_us, 3), "drift_ppm": round(clock.drift_ppm, 3),
            "bound_us": round(clock.bound_us, 3), "collectives": clock.collectives,
            "method": clock.method}
        if clock.bound_us > ALIGN_WARN_US:
            warn(f"rank {rank}: placed on rank {reference}'s clock only within "
                 f"{clock.bound_us / 1000:.3g} ms (the ranges of the collectives they share "
                 "are that wide); cross-rank times closer than that are not resolved")
    return placement
