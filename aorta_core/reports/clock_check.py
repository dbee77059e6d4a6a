"""Is a Unix-clock trace on the wall clock? A check from the markers both sides share.

The benchmark runs each iteration inside ``record_function("aorta.iteration#N")`` between the two
``time.time_ns()`` stamps of its telemetry line (``time_start_unix_ns``, ``time_end_unix_ns``), so
in true time the range lies inside the stamps. Kineto's clock minus the wall clock is then at
least ``range end - stamp end`` and at most ``range start - stamp start``, for every iteration:
the intersection over iterations holds the offset, to within the few µs between a stamp and its
range. (``ProfilerStep#N`` cannot serve: a profiler that steps on the optimizer, torchprof's
default, puts its step boundaries inside iterations; on the H200 that read as a 35-47 ms offset
that no clock had.)

The verdict, per trace: ``confirmed`` when the interval meets the collector's declared bound
(±``error_bound_ms`` around 0), and the trace is placed as it says; ``corrected`` when it does not
or when its rate was measured back (below): the trace is shifted by the interval's midpoint and
its bound is the interval's half-width; ``inconsistent`` when no single offset fits every
iteration (the interval is empty): the trace is not shifted, with a warning. docs/reports.md
"Merged timeline" shows measured intervals.

Before the offset, the rate: torch's profiler turns its CPU clock into Unix time with a rate it
measures itself, and was seen to get it 5x wrong (torch 2.13 on a loaded CPU host: every time and
duration 5x too long, so no offset fits). The first and last shared iteration starts give the
trace's rate against the wall clock (:func:`clock_rate`); a trace off by more than
:data:`CLOCK_RATE_TOLERANCE` has its times divided by it before the offset is checked.
``aorta diagnose`` measures its traces back by the same rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from aorta_core.benchmark.markers import ITERATION_MARKER
from aorta_core.benchmark.schema import RankRecord
from aorta_core.reports.trace_events import TraceDoc

#: How far a trace's clock may run from the wall clock's rate before its times are measured
#: back (the two stamps of an iteration start lie within about a millisecond of each other).
CLOCK_RATE_TOLERANCE = 0.1
#: The shortest wall-clock span between two iteration starts that the rate is measured over.
_MIN_RATE_SPAN_NS = 20_000_000


@dataclass(frozen=True)
class ClockRate:
    """How fast a trace's clock ran against the benchmark's, between two iteration starts."""

    rate: float  # trace time per wall-clock time
    first: int  # the iterations it is measured between
    last: int
    wall_ns: int

    @property
    def off(self) -> bool:
        """Whether the trace's times must be divided by the rate."""
        return abs(self.rate - 1) > CLOCK_RATE_TOLERANCE

    def describe(self) -> str:
        wall_ms = self.wall_ns / 1e6
        return (f"clock ran {self.rate:.2f}x the wall clock ({ITERATION_MARKER}{self.first} to "
                f"#{self.last}: {self.rate * wall_ms:.1f} ms, the benchmark's own stamps: "
                f"{wall_ms:.1f} ms; torch's profiler misjudged its clock); its times are "
                f"divided by {self.rate:.2f}")


def clock_rate(trace_starts_ns: Mapping[int, float], wall_starts_ns: Mapping[int, int]
               ) -> ClockRate | None:
    """The rate of a trace's clock from the ``aorta.iteration#N`` starts it and the benchmark's
    stamps share (``step -> ns``, each on its own clock); ``None`` with fewer than two, over
    less than 20 ms of wall clock, or where the trace's iterations do not move forward (a
    broken trace: no rate would place it)."""
    common = sorted(set(trace_starts_ns) & set(wall_starts_ns))
    if len(common) < 2:
        return None
    first, last = common[0], common[-1]
    wall_ns = wall_starts_ns[last] - wall_starts_ns[first]
    if wall_ns < _MIN_RATE_SPAN_NS or trace_starts_ns[last] <= trace_starts_ns[first]:
        return None
    return ClockRate((trace_starts_ns[last] - trace_starts_ns[first]) / wall_ns, first, last,
                     wall_ns)


def _rescale(doc: TraceDoc, rate: float, about_us: float) -> None:
    """Every time of the trace divided by ``rate`` about ``about_us`` (its own µs), in place."""
    for ev in doc.traceEvents:
        if ev.ts is not UNSET:
            ev.ts = about_us + (ev.ts - about_us) / rate
        if ev.dur is not UNSET:
            ev.dur = ev.dur / rate


def iteration_markers(doc: TraceDoc) -> dict[int, tuple[int, int]]:
    """``global step -> (start, end)`` in Unix ns of the CPU-side ``aorta.iteration#N`` ranges
    (with CUDA, Kineto also writes a ``gpu_user_annotation`` of that name over its kernels)."""
    base, out = doc.baseTimeNanoseconds or 0, {}
    for ev in doc.traceEvents:
        name = ev.name or ""
        if ev.cat == "user_annotation" and name.startswith(ITERATION_MARKER) \
                and ev.ts is not UNSET and ev.dur is not UNSET:
            try:
                step = int(name[len(ITERATION_MARKER):])
            except ValueError:
                continue
            start = base + round(ev.ts * 1000)
            out[step] = (start, start + round(ev.dur * 1000))
    return out


@dataclass(frozen=True)
class ClockCheck:
    """One trace's check: the offset interval, what it says, and where to put the trace."""

    entry: dict[str, Any]  # for otherData.clock_checks
    shift_ns: int  # added to the trace's times
    error_bound_ms: float | None  # the bound to state for the placed trace
    warning: str | None
    #: The rate the trace's times are divided by, about Unix time ``about_ns``, before the
    #: shift; ``None`` where its clock ran at the wall clock's.
    rate: float | None = None
    about_ns: int = 0


def check_clock(doc: TraceDoc, iterations: list[RankRecord], declared_ms: float | None,
                rank: int, file: str) -> ClockCheck | None:
    """The check of one trace against its rank's iterations; ``None`` without shared markers.
    A trace whose clock ran at another rate is measured back here, in place."""
    check = check_markers(iteration_markers(doc), iterations, declared_ms, rank, file)
    if check is not None and check.rate is not None:
        base = doc.baseTimeNanoseconds or 0
        _rescale(doc, check.rate, (check.about_ns - base) / 1000)
    return check


def check_markers(marks: Mapping[int, tuple[int, int]], iterations: list[RankRecord],
                  declared_ms: float | None, rank: int, file: str) -> ClockCheck | None:
    """:func:`check_clock` from a trace's ``aorta.iteration#N`` ranges (Unix ns as written:
    :func:`iteration_markers`), for a reader that kept only those."""
    pairs = [(marks[it.global_step], it) for it in iterations if it.global_step in marks]
    if not pairs:
        return None
    rate = clock_rate({step: start for step, (start, _) in marks.items()},
                      {it.global_step: it.time_start_unix_ns for it in iterations})
    entry: dict[str, Any] = {"rank": rank, "file": file, "markers": len(pairs),
                             "clock_rate": rate.rate if rate else None,
                             "rescaled_about_unix_ns": None}
    said, applied, about_ns = "", None, 0
    if rate is not None and rate.off:
        applied, about_ns = rate.rate, marks[rate.first][0]

        def back(t: int) -> int:
            return about_ns + round((t - about_ns) / applied)
        pairs = [((back(start), back(end)), it) for (start, end), it in pairs]
        entry["rescaled_about_unix_ns"] = about_ns
        said = f"its {rate.describe()}; "
    low = max(end - it.time_end_unix_ns for (_, end), it in pairs)
    high = min(start - it.time_start_unix_ns for (start, _), it in pairs)
    bound_ns = round((declared_ms or 0.0) * 1e6)
    entry |= {"kineto_minus_wall_ms": [low / 1e6, high / 1e6],
              "declared_error_bound_ms": declared_ms}
    where = f"rank {rank}: {file}"
    if low > high:
        entry |= {"verdict": "inconsistent", "shift_ms": 0.0}
        return ClockCheck(entry, 0, declared_ms, (
            f"{where}: {said}no single clock offset puts its {len(pairs)} aorta.iteration ranges "
            f"inside the benchmark's iteration stamps (needs >= {low / 1e6:.3f} ms and <= "
            f"{high / 1e6:.3f} ms); placed by its own clock, not shifted"), applied, about_ns)
    if low <= bound_ns and high >= -bound_ns and not said:
        entry |= {"verdict": "confirmed", "shift_ms": 0.0}
        return ClockCheck(entry, 0, declared_ms, None, applied, about_ns)
    shift = -(low + high) // 2
    half_ms = round((high - low) / 2 / 1e6, 6)
    entry |= {"verdict": "corrected", "shift_ms": shift / 1e6}
    return ClockCheck(entry, shift, half_ms, (
        f"{where}: {said}its clock is {low / 1e6:.3f} to {high / 1e6:.3f} ms off the wall clock "
        f"at {len(pairs)} aorta.iteration ranges (declared ±{declared_ms} ms); shifted by "
        f"{shift / 1e6:.3f} ms, now ±{half_ms} ms"), applied, about_ns)
