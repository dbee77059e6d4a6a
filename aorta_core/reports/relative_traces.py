"""Where a trace of relative times goes on the merged timeline (``TimelineSource.clock ==
"relative"``: Proton's, whose times count from its first kernel).

By the collector's clock marks where it gave them (events it ran inside wall-clock windows it
stamped): where every marked event fits its window, half the width of the placements that fit
being the bound, listed in ``otherData.clock_checks``. Else centred in the span it must lie in:
the rank's benchmark iterations (``span="iterations"``, when they are long enough) or the
trial's run, half the slack being the bound.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import UNSET

from aorta_core.benchmark.schema import RankRecord
from aorta_core.reports.timeline_inputs import Trace
from aorta_core.reports.trace_events import UNIX_NS_LIMIT, Event, TraceDoc

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class _Merge(Protocol):
    """What placing a trace reads of the rank's merge
    (:class:`aorta_core.reports.timeline_rank._Merge`)."""

    trial: Path
    rank: int
    record: Mapping[str, Any] | None
    origin: int | None
    clock_checks: list[dict[str, Any]]
    warn: Callable[[str], None]

    def us(self, unix_ns: int) -> float: ...


def _ns(seconds: Any) -> int | None:
    """A record's number of seconds in ns, where it is a time a clock holds (0 to 2^63 ns);
    ``None`` for anything else (``1e300``, ``inf``, text)."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) \
            and 0 <= seconds < UNIX_NS_LIMIT / 1e9:
        return round(seconds * 1e9)
    return None


def record_start(record: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(trial start in Unix ns, its resolution in ns) from a trial record."""
    if not record:
        return None
    exact = _ns(record.get("started_at_unix"))
    if exact is not None:
        return exact, 0
    try:
        start = _ns(datetime.fromisoformat(str(record.get("started_at"))).timestamp())
    except (ValueError, OverflowError, OSError):  # not ISO text; a date no clock holds
        return None
    return (start // 10**9 * 10**9, 10**9) if start is not None else None


def _span(m: _Merge, path: Path, span: str, iterations: list[RankRecord], length_ns: int
          ) -> tuple[int, int, str] | None:
    """The span a trace of relative times, ``length_ns`` long, must lie in, and what says so:
    the rank's benchmark iterations (``span="iterations"``, when they are long enough), else
    the trial's run."""
    if span == "iterations" and iterations:
        low, high = iterations[0].time_start_unix_ns, iterations[-1].time_end_unix_ns
        if high - low >= length_ns:
            return low, high, "benchmark_iterations"
    start = record_start(m.record)
    wall = _ns((m.record or {}).get("wall_time_s"))
    if start is None or wall is None:
        return None
    low, high = start[0], start[0] + start[1] + wall
    mtime = path.stat().st_mtime_ns
    if low <= mtime <= high:  # written when the profiler finalised, after its last event
        high = mtime
    return (low, high, "run_window") if high - low >= length_ns else None


def _by_marks(m: _Merge, trace: Trace, timed: list[Event]) -> tuple[int, float] | None:
    """The Unix ns of the trace's time 0 and its bound (ms) from the collector's clock marks:
    where every marked event lies inside its wall-clock window (the k-th mark of a name is the
    k-th event of that name); ``None``, after a line, where no placement fits them all."""
    source, where = trace.source, f"rank {m.rank}: {trace.source.path.relative_to(m.trial)}"
    named: dict[str, list[Event]] = defaultdict(list)
    for ev in sorted(timed, key=lambda ev: ev.ts):
        named[ev.name or ""].append(ev)
    lows, highs, seen = [], [], Counter()  # ints: Unix ns are past a double's ns precision
    for name, not_before, not_after in source.marks:
        index, seen[name] = seen[name], seen[name] + 1
        if index < len(named[name]):
            ev = named[name][index]
            lows.append(not_before - round(ev.ts * 1000))
            highs.append(not_after - round((ev.ts + (ev.dur or 0)) * 1000))
    used = len(lows)
    low, high = (max(lows), min(highs)) if used else (0, 0)
    entry: dict[str, Any] = {"rank": m.rank, "file": str(source.path.relative_to(m.trial)),
                             "markers": used, "kind": "clock marks"}
    m.clock_checks.append(entry)
    if not used or low > high:
        entry["verdict"] = "inconsistent" if used else "no marked event"
        said = (f"no single placement puts its {used} clock marks inside their wall-clock "
                "windows (its clock ran at another rate?)" if used else
                f"none of its {len(source.marks)} clock marks names an event of the trace")
        m.warn(f"{where}: {said}; placed by its span instead")
        return None
    bound = round((high - low) / 2 / 1e6, 6)
    entry |= {"verdict": "placed", "time_zero_unix_ns": [low, high], "error_bound_ms": bound}
    return (low + high) // 2, bound


def place_relative(m: _Merge, trace: Trace, doc: TraceDoc, iterations: list[RankRecord]
                   ) -> tuple[float, dict[str, Any]]:
    """The shift (µs) that puts a trace of relative times where its clock marks fit, else
    centres it in the span it must lie in (with no span known it starts at the origin,
    unaligned), and what ``otherData.sources`` says of it."""
    path = trace.source.path
    timed = [ev for ev in doc.traceEvents if ev.ph != "M" and ev.ts is not UNSET]
    first = min((ev.ts for ev in timed), default=0.0)
    length_ns = round((max((ev.ts + (ev.dur or 0) for ev in timed), default=first) - first)
                      * 1000)
    marked = _by_marks(m, trace, timed) if trace.source.marks else None
    span = None if marked else _span(m, path, trace.source.span, iterations, length_ns)
    if marked:
        zero, bound = marked
        start, method = zero + round(first * 1000), "clock_marks"
    elif span is None:
        start, bound, method = m.origin or 0, None, "unaligned"
        m.warn(f"{path}: no anchor for a trace of relative times (no benchmark iterations to "
               "lie in, no run span in record.json); placed at the timeline's origin, not "
               "aligned")
    else:
        low, high, method = span
        slack = high - low - length_ns
        start, bound = low + slack // 2, round(slack / 2 / 1e6, 6)
    return m.us(start) - first, {"alignment": method, "error_bound_ms": bound,
                                 "first_event_unix_ns": start}
