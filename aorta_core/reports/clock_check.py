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
(±``error_bound_ms`` around 0), and the trace is placed as it says; ``corrected`` when it does not:
the trace is shifted by the interval's midpoint and its bound is the interval's half-width;
``inconsistent`` when no single offset fits every iteration (the interval is empty): the trace is
left where it says, with a warning. docs/reports.md "Merged timeline" shows measured intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from aorta_core.benchmark.markers import ITERATION_MARKER
from aorta_core.benchmark.schema import RankRecord
from aorta_core.reports.trace_events import TraceDoc


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


def check_clock(doc: TraceDoc, iterations: list[RankRecord], declared_ms: float | None,
                rank: int, file: str) -> ClockCheck | None:
    """The check of one trace against its rank's iterations; ``None`` without shared markers."""
    marks = iteration_markers(doc)
    pairs = [(marks[it.global_step], it) for it in iterations if it.global_step in marks]
    if not pairs:
        return None
    low = max(end - it.time_end_unix_ns for (_, end), it in pairs)
    high = min(start - it.time_start_unix_ns for (start, _), it in pairs)
    bound_ns = round((declared_ms or 0.0) * 1e6)
    entry = {"rank": rank, "file": file, "markers": len(pairs),
             "kineto_minus_wall_ms": [low / 1e6, high / 1e6],
             "declared_error_bound_ms": declared_ms}
    where = f"rank {rank}: {file}"
    if low > high:
        entry |= {"verdict": "inconsistent", "shift_ms": 0.0}
        return ClockCheck(entry, 0, declared_ms, (
            f"{where}: no single clock offset puts its {len(pairs)} aorta.iteration ranges inside "
            f"the benchmark's iteration stamps (needs >= {low / 1e6:.3f} ms and <= "
            f"{high / 1e6:.3f} ms); placed by its own clock, not corrected"))
    if low <= bound_ns and high >= -bound_ns:
        entry |= {"verdict": "confirmed", "shift_ms": 0.0}
        return ClockCheck(entry, 0, declared_ms, None)
    shift = -(low + high) // 2
    half_ms = round((high - low) / 2 / 1e6, 6)
    entry |= {"verdict": "corrected", "shift_ms": shift / 1e6}
    return ClockCheck(entry, shift, half_ms, (
        f"{where}: its clock is {low / 1e6:.3f} to {high / 1e6:.3f} ms off the wall clock at "
        f"{len(pairs)} aorta.iteration ranges (declared ±{declared_ms} ms); shifted by "
        f"{shift / 1e6:.3f} ms, now ±{half_ms} ms"))
