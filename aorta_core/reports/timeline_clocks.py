"""``aorta timeline --align``: which clock each rank's events are placed on.

``collectives`` (the default): every rank's host clock mapped onto the lowest rank's by the
collectives they share (:mod:`~aorta_core.reports.rank_alignment`), over what ``host`` does.
``host``: each rank on its own host's clock, as its sources stamp it, each Unix-clock trace
moved as its clock check against the benchmark's iterations says
(:mod:`~aorta_core.reports.clock_check`). ``none``: every source at the times it wrote; the
clock checks are reported, not applied.

The mapping is fitted on the ranks' Kineto traces as written, and a rank's clock check may move
those traces on its host's clock; the host clocks then differ by the fitted offset plus the
reference trace's check shift less the rank's (:meth:`Placement.onto_host`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aorta_core.reports.rank_alignment import RankClock, align_ranks
from aorta_core.reports.rank_traces import read_ranks
from aorta_core.reports.timeline_inputs import RankInputs

ALIGN_MODES = ("collectives", "host", "none")
#: A rank placed only to within more than this (µs) is named in a warning: cross-rank times
#: closer than its bound are not resolved.
ALIGN_WARN_US = 1000.0


@dataclass
class Placement:
    """The ranks' clock mappings of one timeline, and what ``otherData.rank_alignment`` says."""

    align: str
    #: Per rank: its mapping onto the reference rank's trace clock, and the trace (relative
    #: path) the mapping was fitted on.
    fitted: dict[int, tuple[RankClock, str]] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The reference rank's fitted trace's clock-check shift, once its rank is merged.
    reference_shift_ns: int = 0

    def applies_checks(self) -> bool:
        return self.align != "none"

    def onto_host(self, rank: int, shift_of: Callable[[str], int]) -> RankClock | None:
        """Rank ``rank``'s mapping of its host clock onto the reference rank's host clock;
        ``shift_of(file)``: the clock-check shift (ns) of the rank's trace ``file``. ``None``
        where the rank stays on its own clock. Call it for the ranks in order (the reference
        first)."""
        if rank not in self.fitted:
            return None
        clock, file = self.fitted[rank]
        shift = shift_of(file) if self.applies_checks() else 0
        if clock.method == "reference rank":
            self.reference_shift_ns = shift
            return None
        placed = replace(clock, offset_us=clock.offset_us
                         + (self.reference_shift_ns - shift) / 1e3)
        self.entries[str(rank)]["offset_us"] = round(placed.offset_us, 3)
        return placed


def place_ranks(align: str, trial: Path, inputs: Mapping[int, RankInputs],
                warn: Callable[[str], None]) -> Placement:
    """Fit every rank's clock (``align="collectives"``, two ranks or more); a rank left on its
    own clock, or placed only within more than :data:`ALIGN_WARN_US`, is said in one line."""
    placement = Placement(align)
    if align != "collectives" or len(inputs) < 2:
        return placement
    read = read_ranks({rank: [t.source.path for t in found.traces if t.source.clock == "unix"]
                       for rank, found in inputs.items()}, trial, lambda _: None)
    traces = {rank: trace for rank, trace in read.items() if trace.steps}
    fitted = align_ranks(traces) if len(traces) > 1 else {}
    for rank in sorted(inputs):
        clock = fitted.get(rank, f"rank {rank}: no readable Kineto trace with profiled steps "
                                 "to align it by; left on its own host's clock")
        if isinstance(clock, str):
            if fitted:  # said where other ranks are aligned; a trial with none is no news
                warn(clock)
            placement.entries[str(rank)] = {"method": "host", "reason": clock}
            continue
        placement.fitted[rank] = clock, traces[rank].sources[0]
        placement.entries[str(rank)] = {
            "offset_us": round(clock.offset_us, 3), "drift_ppm": round(clock.drift_ppm, 3),
            "bound_us": round(clock.bound_us, 3), "collectives": clock.collectives,
            "method": clock.method}
        if clock.bound_us > ALIGN_WARN_US:
            warn(f"rank {rank}: placed on rank {min(traces)}'s clock only within "
                 f"{clock.bound_us / 1000:.3g} ms (the ranges of the collectives they share "
                 "are that wide); cross-rank times closer than that are not resolved")
    return placement
