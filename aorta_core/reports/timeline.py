"""``aorta timeline``: one Trace Event Format file per trial, every rank and source on one clock.

Per rank, as ``rank <R> · ...`` processes sorted rank by rank:

- the built-in benchmark's ``benchmark/rank_<RR>_metrics.jsonl``: an iteration slice from its
  ``time_*_unix_ns`` (``time.time_ns()``), phase and collective slices, step time and overlap
  ratio as counters; its own profiler's Kineto traces (``benchmark/torch_profiler/``);
- the chrome traces each collector that ran names through ``timeline_sources``
  (:mod:`aorta_core.reports.timeline_inputs`), placed by the clock it declares: ``unix``
  (``ts`` µs + ``baseTimeNanoseconds`` is Unix time, as Kineto writes; HTA reads it so) at its
  place, with the collector's stated bound; ``relative`` (times count from the trace's start,
  with no absolute anchor, as Proton writes) centred in the span it must lie in (the
  benchmark's iterations, or the trial's run), half the slack being its bound.

Output ``ts`` are µs after the origin (``otherData.origin_unix_ns``): the trial's start from its
record, else the first benchmark iteration, else the first event of a Unix-clock trace of the
first rank read. ``--window`` counts ms from it. Ranks are read one at a time and written as
they are read. docs/reports.md "Merged timeline" says how far off each alignment can be.
"""

from __future__ import annotations

import bisect
import math
import reprlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from aorta_core.api.intervals import merged
from aorta_core.api.oneline import exception_line
from aorta_core.benchmark.schema import RankRecord
from aorta_core.benchmark.stream_overlap import COMM_KINDS
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, load_record
from aorta_core.reports.clock_check import ClockCheck, check_clock
from aorta_core.reports.timeline_clocks import Placement, place_ranks
from aorta_core.reports.timeline_inputs import (
    BENCHMARK_POSITION,
    RankInputs,
    Trace,
    discover,
    read_telemetry,
)
from aorta_core.reports.trace_events import (
    UNIX_NS_LIMIT,
    Event,
    Lanes,
    TraceDoc,
    TraceWriter,
    off_the_clock,
    on_the_clock,
    raw,
    read_trace,
)

if TYPE_CHECKING:
    from aorta_core.engine.cells import Cell
    from aorta_core.reports.rank_alignment import RankClock

TIMELINE_NAME = "timeline.json"
#: Before 2001-09-09 in Unix ns: a "unix" trace whose events start earlier counts from
#: something else (its own start, boot), so it cannot be put on the clock.
_UNIX_NS_MIN = 10**18
_ANNOTATIONS = frozenset({"user_annotation", "gpu_user_annotation"})

Warn = Callable[[str], None]
Window = tuple[float, float]


class Ints:
    """A set of ints as sorted disjoint runs ``(first, last)``: ``--steps 5-99999999999`` is one
    run, never a set of 1e11 ints."""

    def __init__(self, runs: Iterable[tuple[int, int]]) -> None:
        joined = merged((first, last + 1) for first, last in runs)  # [2, 3] and [4, 5] join
        self.firsts = [first for first, _ in joined]
        self.lasts = [end - 1 for _, end in joined]

    def __contains__(self, value: object) -> bool:
        i = bisect.bisect_right(self.firsts, value) - 1
        return i >= 0 and value <= self.lasts[i]

    def to_json(self) -> list[int | list[int]]:
        """The ints, a run of three or more as ``[first, last]``."""
        out: list[int | list[int]] = []
        for first, last in zip(self.firsts, self.lasts, strict=True):
            out += [[first, last]] if last - first > 1 else list(range(first, last + 1))
        return out


@dataclass(frozen=True)
class Selection:
    """What to keep: ranks, ``ProfilerStep#N``/benchmark steps, a window in ms after the origin.
    Ranks and steps may be given as any collection of ints."""

    ranks: Ints | None = None
    steps: Ints | None = None
    window_ms: tuple[float | None, float | None] | None = None

    def __post_init__(self) -> None:
        for name in ("ranks", "steps"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Ints):
                object.__setattr__(self, name, Ints((v, v) for v in value))

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks.to_json() if self.ranks is not None else None,
                "steps": self.steps.to_json() if self.steps is not None else None,
                "window_ms": list(self.window_ms) if self.window_ms is not None else None}


def parse_ints(text: str) -> Ints:
    """``"0,2-3"`` -> 0, 2 and 3; ``ValueError`` on anything else."""
    runs = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:  # not a number, or one of more than 4300 digits
            first = last = -1
        if first < 0 or last < first:
            raise ValueError(f"{part.strip()!r} is not N or A-B (0 <= A <= B)")
        runs.append((first, last))
    return Ints(runs)


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``"START:END"`` in ms (either side may be empty); ``ValueError`` on anything else, ``nan``
    and ``inf`` too."""
    start, colon, end = text.partition(":")
    try:
        low = float(start) if start.strip() else None
        high = float(end) if end.strip() else None
    except ValueError:
        colon = ""
    given = [v for v in (low, high) if v is not None] if colon else []
    if not colon or not all(map(math.isfinite, given)) or given != sorted(given):
        raise ValueError(f"{text!r} is not START:END in ms with START <= END (numbers; leave "
                         "a side out for no limit)")
    return low, high


def _ns(seconds: Any) -> int | None:
    """A record's number of seconds in ns, where it is a time a clock holds (0 to 2^63 ns);
    ``None`` for anything else (``1e300``, ``inf``, text)."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) \
            and 0 <= seconds < UNIX_NS_LIMIT / 1e9:
        return round(seconds * 1e9)
    return None


def _record_start(record: Mapping[str, Any] | None) -> tuple[int, int] | None:
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


@dataclass
class _KinetoStep:
    step: int
    cat: str
    start_ns: int
    end_ns: int


def _profiler_steps(doc: TraceDoc, shift_ns: int = 0) -> list[_KinetoStep]:
    """Every ``ProfilerStep#N`` slice (CPU annotation and its GPU projection), in Unix ns."""
    base, out = (doc.baseTimeNanoseconds or 0) + shift_ns, []
    for ev in doc.traceEvents:
        name = ev.name or ""
        if ev.cat in _ANNOTATIONS and name.startswith("ProfilerStep#") and ev.ts is not UNSET:
            try:
                step = int(name[len("ProfilerStep#"):])
            except ValueError:
                continue
            start = base + round(ev.ts * 1000)
            out.append(_KinetoStep(step, ev.cat, start, start + round((ev.dur or 0) * 1000)))
    return out


def _keeper(windows: list[Window] | None) -> Callable[[float, float], bool] | None:
    """Whether [start, end] meets one of the (merged) windows; ``None``: keep everything."""
    if windows is None:
        return None
    starts = [low for low, _ in windows]

    def keep(start: float, end: float) -> bool:
        i = bisect.bisect_right(starts, end) - 1
        return i >= 0 and windows[i][1] >= start

    return keep


@dataclass
class _Merge:
    """The state of one trial's merge; only lanes and summaries outlive a rank."""

    trial: Path
    selection: Selection
    record: Mapping[str, Any] | None
    warn: Warn
    origin: int | None
    origin_from: str
    lanes: Lanes = field(default_factory=Lanes)
    sources: list[dict[str, Any]] = field(default_factory=list)
    clock_checks: list[dict[str, Any]] = field(default_factory=list)
    forwarded: list[Any] = field(default_factory=list)
    placement: Placement = field(default_factory=lambda: Placement("host"))
    #: The rank being merged: its host clock's mapping onto the reference rank's (``None``:
    #: its own clock).
    clock: RankClock | None = None

    def us(self, unix_ns: int) -> float:
        """Output time (µs after the origin) of a Unix time in ns of the rank being merged."""
        t = (unix_ns - (self.origin or 0)) / 1000
        if self.clock is None:
            return t
        lead = (self.origin or 0) / 1000 - self.clock.about_us  # t's distance from about
        return t + self.clock.offset_us + self.clock.drift_ppm * 1e-6 * (t + lead)

    def rate(self) -> float:
        """How much longer a µs of the rank being merged is on the output clock."""
        return 1.0 if self.clock is None else 1 + self.clock.drift_ppm * 1e-6

    def shift_ns(self, check: ClockCheck | None) -> int:
        """What a trace's clock check moves it by, as ``--align`` says."""
        return check.shift_ns if check is not None and self.placement.applies_checks() else 0

    def windows(self, iterations: list[RankRecord], steps: list[_KinetoStep]
                ) -> list[Window] | None:
        """The rank's selected spans in output µs; ``None`` when everything is selected."""
        sel, windows = self.selection, None
        if sel.steps is not None:
            spans: dict[int, list[Window]] = defaultdict(list)
            for it in iterations:
                if it.global_step in sel.steps:
                    spans[it.global_step].append((self.us(it.time_start_unix_ns),
                                                  self.us(it.time_end_unix_ns)))
            for st in steps:
                if st.step in sel.steps:
                    spans[st.step].append((self.us(st.start_ns), self.us(st.end_ns)))
            windows = [(min(a for a, _ in s), max(b for _, b in s)) for s in spans.values()]
        if sel.window_ms is not None:
            low, high = sel.window_ms
            low_us = -math.inf if low is None else low * 1000
            high_us = math.inf if high is None else high * 1000
            spans = [(low_us, high_us)] if windows is None else windows
            windows = [(max(a, low_us), min(b, high_us)) for a, b in spans
                       if max(a, low_us) <= min(b, high_us)]
        return None if windows is None else merged(windows)

    def remap(self, events: list[Event], shift_us: float,
              keep: Callable[[float, float], bool] | None,
              process: Callable[[Any], Any], thread_label: Callable[[Any, Any], str],
              rate: float = 1.0) -> list[Event]:
        """Shift (``ts * rate + shift_us``), select and renumber one input file's events; its
        ``M`` events are kept for the rank's end, where those of lanes that got events are
        forwarded. ``process(pid)`` is the output process of an input pid. Mutates the events:
        the decoded file is not used afterwards."""
        lanes, flows = self.lanes, self.lanes.flow_block()
        ids: dict[tuple[Any, Any], tuple[int, int]] = {}
        procs: dict[Any, Any] = {}
        out: list[Event] = []
        meta: list[Event] = []
        append = out.append
        for ev in events:  # the hot loop: ~0.3 µs an event
            ts = ev.ts
            if ts is UNSET or ev.ph == "M":
                if ev.ph == "M":
                    meta.append(ev)
                continue
            t = ts * rate + shift_us
            if keep is not None and not keep(t, t + (ev.dur or 0.0)):
                continue
            ev.ts = t  # not rounded: already as short as the input's, and rounding costs 20 %
            key = (ev.pid, ev.tid)
            try:
                ev.pid, ev.tid = ids[key]
            except KeyError:
                proc = procs[ev.pid] = process(ev.pid)
                ev.pid, ev.tid = ids[key] = (proc.pid, lanes.thread(proc, key,
                                                                    thread_label(*key)))
            if ev.id is not UNSET:
                ev.id = (flows + ev.id if isinstance(ev.id, int) and 0 <= ev.id < 1 << 32
                         else f"{flows}:{ev.id}")
            append(ev)
        for ev in meta:
            proc = procs.get(ev.pid)
            if proc is not None:
                process_level = (ev.name or "").startswith("process_")
                self.forwarded.append((proc, None if process_level else (ev.pid, ev.tid), ev))
        return out


def _process_labels(events: list[Event], prefix: str) -> dict[Any, tuple[str, tuple[Any, ...]]]:
    """Input pid -> (our label, sort key) from the file's process metadata (Kineto's names
    CPU processes and GPUs; ``labels`` wins over ``name``, as chrome://tracing shows them)."""
    info: dict[Any, dict[str, Any]] = defaultdict(dict)
    for ev in events:
        if ev.ph == "M" and ev.args is not UNSET and (ev.name or "").startswith("process_"):
            try:
                info[ev.pid].update(msgspec.json.decode(ev.args))
            except msgspec.DecodeError:
                continue
    out = {}
    for pid, args in info.items():
        label = str(args.get("labels") or args.get("name") or "")
        if not label.startswith("GPU"):
            label = f"{label} (pid {pid})".lstrip()
        index = args.get("sort_index")
        out[pid] = (f"{prefix} {label}", (index if isinstance(index, int) else math.inf, str(pid)))
    return out


def _thread_label(template: str) -> Callable[[Any, Any], str]:
    """A lane's default name (the file's own ``thread_name`` events win): ``template`` for an
    integer tid, else the input's pid and tid."""
    def label(pid: Any, tid: Any) -> str:
        if isinstance(tid, int):
            return template.replace("{tid}", str(tid))
        return " / ".join(str(x) for x in (pid, tid) if x not in ("", UNSET)) or "instants"
    return label


def _processes(m: _Merge, rank: int, trace: Trace, doc: TraceDoc) -> Callable[[Any], Any]:
    """The output process of an input pid: one per pid over the rank's files of a source,
    named by the file's metadata; a file without pids is one process named after it; the
    named lane groups (Kineto's ``Spans``/``Traces``) are one ``markers`` process."""
    labels = _process_labels(doc.traceEvents, trace.label)
    path = trace.source.path

    def process(pid: Any) -> Any:
        if pid is UNSET:
            key, label, order = path, f"{trace.label} {path.name}", (math.inf, str(path))
        elif not isinstance(pid, int):
            key, label, order = "markers", f"{trace.label} markers", (math.inf, "~")
        else:
            key = pid
            label, order = labels.get(pid, (f"{trace.label} pid {pid}", (math.inf, str(pid))))
        return m.lanes.process(rank, trace.kind, trace.position, key, label, order)

    return process


def _merge_benchmark(m: _Merge, rank: int, path: Path, iterations: list[RankRecord],
                     keep: Callable[[float, float], bool] | None) -> list[Event]:
    """Iteration, phase and collective slices; step time and overlap counters."""
    proc = m.lanes.process(rank, "benchmark", BENCHMARK_POSITION, None, "benchmark")
    it_tid = m.lanes.thread(proc, "iterations", "iterations")
    pid, out, lane_ends = proc.pid, [], defaultdict(list)
    early_ms = 0.0
    for it in iterations:
        t0, t1 = m.us(it.time_start_unix_ns), m.us(it.time_end_unix_ns)
        if keep is not None and not keep(t0, t1):
            continue
        args = {"global_step": it.global_step, "epoch": it.epoch, "step": it.step,
                "step_time_ms": it.step_time_ms, "loss": it.loss,
                "samples_per_s": it.samples_per_s, "tflops": it.tflops}
        out.append(Event(ph="X", name=f"iteration {it.global_step}", cat="benchmark",
                         ts=round(t0, 3), dur=round(t1 - t0, 3), pid=pid, tid=it_tid,
                         args=raw(args)))
        if keep is None or keep(t0, t0):  # counters are instants at the iteration's start
            out.append(Event(ph="C", name="step", ts=round(t0, 3), pid=pid, tid=it_tid,
                             args=raw({"time_ms": it.step_time_ms})))
            ratios = {k: v for k, v in (("ratio", it.overlap_ratio),
                                        ("comm_hidden", it.comm_hidden_ratio)) if v is not UNSET}
            if ratios:
                out.append(Event(ph="C", name="overlap", ts=round(t0, 3), pid=pid, tid=it_tid,
                                 args=raw(ratios)))
        if it.profile is UNSET:
            continue
        early_ms = max(early_ms, (t1 - t0) / 1000 - it.profile.total_ms)
        for rg in sorted(it.profile.ranges, key=lambda r: r.start_ms):
            a, b = t0 + rg.start_ms * 1000, t0 + rg.end_ms * 1000
            if keep is not None and not keep(a, b):
                continue
            group = (f"stream {rg.stream}" if rg.stream is not UNSET
                     else rg.kind if rg.kind in COMM_KINDS else "phases")
            ends = lane_ends[group]
            lane = next((i for i, end in enumerate(ends) if end <= a), len(ends))
            ends[lane:lane + 1] = [b]
            tid = m.lanes.thread(proc, (group, lane), group + (f" #{lane + 1}" if lane else ""))
            name = rg.kind if rg.kind not in COMM_KINDS else f"{rg.kind}: {rg.tag}"
            out.append(Event(ph="X", name=name, cat="benchmark", ts=round(a, 3),
                             dur=round(b - a, 3), pid=pid, tid=tid,
                             args=raw({"tag": rg.tag, "duration_ms": rg.duration_ms,
                                       **rg.metadata})))
    m.sources.append({"rank": rank, "kind": "benchmark", "file": str(path.relative_to(m.trial)),
                      "events": len(out), "alignment": "time_start_unix_ns",
                      # ranges count from timeline.begin() (a perf_counter read, or a CUDA
                      # event the GPU runs when it gets there), at most (host step - total_ms)
                      # after the iteration's host start, where they are hung
                      "error_bound_ms": round(early_ms, 6)})
    return out


def _span(m: _Merge, path: Path, span: str, iterations: list[RankRecord], length_ns: int
          ) -> tuple[int, int, str] | None:
    """The span a trace of relative times, ``length_ns`` long, must lie in, and what says so:
    the rank's benchmark iterations (``span="iterations"``, when they are long enough), else
    the trial's run."""
    if span == "iterations" and iterations:
        low, high = iterations[0].time_start_unix_ns, iterations[-1].time_end_unix_ns
        if high - low >= length_ns:
            return low, high, "benchmark_iterations"
    start = _record_start(m.record)
    wall = _ns((m.record or {}).get("wall_time_s"))
    if start is None or wall is None:
        return None
    low, high = start[0], start[0] + start[1] + wall
    mtime = path.stat().st_mtime_ns
    if low <= mtime <= high:  # written when the profiler finalised, after its last event
        high = mtime
    return (low, high, "run_window") if high - low >= length_ns else None


def _place_relative(m: _Merge, trace: Trace, doc: TraceDoc, iterations: list[RankRecord]
                    ) -> tuple[float, dict[str, Any]]:
    """The shift (µs) that centres a trace of relative times in the span it must lie in (half
    the slack is the error bound; with no span known it starts at the origin, unaligned), and
    what ``otherData.sources`` says of it."""
    path = trace.source.path
    timed = [ev for ev in doc.traceEvents if ev.ph != "M" and ev.ts is not UNSET]
    first = min((ev.ts for ev in timed), default=0.0)
    length_ns = round((max((ev.ts + (ev.dur or 0) for ev in timed), default=first) - first)
                      * 1000)
    span = _span(m, path, trace.source.span, iterations, length_ns)
    if span is None:
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


def _merge_trace(m: _Merge, rank: int, trace: Trace, doc: TraceDoc,
                 iterations: list[RankRecord], keep: Callable[[float, float], bool] | None,
                 check: ClockCheck | None) -> list[Event]:
    """One collector's (or the benchmark's Kineto) trace, placed by its declared clock (a
    ``unix`` one as its clock check says)."""
    source = trace.source
    rate = 1.0
    if source.clock == "unix":
        shift, rate = m.us((doc.baseTimeNanoseconds or 0) + m.shift_ns(check)), m.rate()
        placed = {"alignment": "unix" if doc.baseTimeNanoseconds is None
                  else "baseTimeNanoseconds",
                  "error_bound_ms": check.error_bound_ms if check else source.error_bound_ms}
        if check:
            placed["clock_check"] = check.entry["verdict"]
    else:
        shift, placed = _place_relative(m, trace, doc, iterations)
    out = m.remap(doc.traceEvents, shift, keep, _processes(m, rank, trace, doc),
                  _thread_label(source.thread_name), rate)
    m.sources.append({"rank": rank, "kind": trace.kind,
                      "file": str(source.path.relative_to(m.trial)), "events": len(out),
                      **placed})
    return out


def _unix_ns(doc: TraceDoc) -> Iterator[int]:
    """Unix time of each timed event of a ``unix`` trace, in the file's order."""
    base = doc.baseTimeNanoseconds or 0
    return (base + round(ev.ts * 1000) for ev in doc.traceEvents
            if ev.ph != "M" and ev.ts is not UNSET)


def _read_traces(m: _Merge, traces: list[Trace]) -> list[tuple[Trace, TraceDoc]]:
    """Each readable trace; the others are skipped with one line each."""
    out = []
    for trace in traces:
        path = trace.source.path
        try:
            doc = read_trace(path, m.trial)
        except ValueError as exc:
            m.warn(f"skipping {path}: {exc}")
            continue
        base_us = (doc.baseTimeNanoseconds or 0) / 1e3 if trace.source.clock == "unix" else 0
        events = on_the_clock(doc.traceEvents, base_us)
        if len(events) < len(doc.traceEvents):
            m.warn(off_the_clock(path, len(doc.traceEvents) - len(events)))
            doc.traceEvents = events
        first = next(_unix_ns(doc), None) if trace.source.clock == "unix" else None
        if first is not None and not _UNIX_NS_MIN <= first < UNIX_NS_LIMIT:
            m.warn(f"skipping {path}: its times are not Unix time (an event at {first} ns; "
                   "no baseTimeNanoseconds?), so it cannot be put on the clock")
            continue
        out.append((trace, doc))
    return out


def _checked(m: _Merge, rank: int, trace: Trace, doc: TraceDoc, iterations: list[RankRecord]
             ) -> ClockCheck | None:
    """A Unix-clock trace checked against the benchmark's iterations (when both have them):
    listed in ``otherData.clock_checks``, a failed check warned in one line; a trace whose clock
    ran at another rate leaves measured back."""
    check = check_clock(doc, iterations, trace.source.error_bound_ms, rank,
                        str(trace.source.path.relative_to(m.trial)))
    if check is not None:
        m.clock_checks.append(check.entry)
        if check.warning:
            m.warn(check.warning)
    return check


def _merge_rank(m: _Merge, rank: int, inputs: RankInputs, writer: TraceWriter) -> None:
    """Read one rank's files, write its events and lane metadata, then let them go."""
    traces = _read_traces(m, inputs.traces)
    unix = [(trace, doc) for trace, doc in traces if trace.source.clock == "unix"]
    iterations = read_telemetry(inputs.jsonl, m.warn) if inputs.jsonl else []
    checks = {id(doc): _checked(m, rank, trace, doc, iterations) for trace, doc in unix}
    m.clock = m.placement.clocks.get(rank)
    if m.origin is None:
        firsts = [(first, trace.label) for trace, doc in unix
                  if (first := min(_unix_ns(doc), default=None)) is not None]
        if firsts:
            m.origin, label = min(firsts)
            m.origin_from = f"first {label} event of rank {rank}"
    steps = [s for _, doc in unix for s in _profiler_steps(doc, m.shift_ns(checks[id(doc)]))]
    windows = m.windows(iterations, steps)
    if windows == []:
        m.warn(f"rank {rank}: nothing in the selection ({m.selection.to_json()})")
    keep = _keeper(windows)
    if inputs.jsonl:
        writer.write(_merge_benchmark(m, rank, inputs.jsonl, iterations, keep))
    for trace, doc in traces:
        writer.write(_merge_trace(m, rank, trace, doc, iterations, keep, checks.get(id(doc))))
    writer.write(m.lanes.close_rank(rank, m.forwarded))
    m.forwarded.clear()
    m.clock = None


def _origin(trial: Path, record: Mapping[str, Any] | None, ranks: dict[int, RankInputs],
            warn: Warn) -> tuple[int | None, str]:
    """The timeline's origin and what it is; a record's start that is no time (``1e300``) is
    passed over with one line."""
    start = _record_start(record)
    if start is not None and start[1] == 0:
        return start[0], "record started_at_unix"
    origin: tuple[int | None, str] = (None, "")
    if start is not None:
        origin = start[0], "record started_at"
    elif firsts := [its[0].time_start_unix_ns for r in ranks.values() if r.jsonl
                    if (its := read_telemetry(r.jsonl, lambda _: None))]:
        origin = min(firsts), "first benchmark iteration"
    given = (record or {}).get("started_at_unix")
    if given is not None:
        warn(f"{trial / RECORD_NAME}: started_at_unix {reprlib.repr(given)} is no Unix time in "
             f"seconds (0 to 2^63 ns); the timeline's origin is the {origin[1] or 'first event'}"
             " instead")
    return origin


@dataclass(frozen=True)
class Timeline:
    """What was written: the file, its ranks and the events per source kind."""

    path: Path
    ranks: list[int]
    events: dict[str, int]


def build_timeline(trial: Path, output: Path | None = None, selection: Selection = Selection(),
                   record: Mapping[str, Any] | None = None, warn: Warn = warning_line,
                   hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                   align: str = "collectives") -> Timeline | None:
    """Merge one trial's traces into ``output`` (default ``<trial>/timeline.json``; ``.gz``
    compresses). ``record`` defaults to the trial's ``record.json``; its collectors are asked
    for their traces (``timeline_sources``, each within ``hook_timeout_s``). ``align``: which
    clock each rank is placed on (:mod:`.timeline_clocks`). ``None`` when the trial holds no
    source; unreadable inputs are skipped with a warning naming the file."""
    trial = Path(trial).absolute()
    if record is None:
        try:
            record = msgspec.to_builtins(load_record(trial / RECORD_NAME))
        except (FileNotFoundError, BadRecord):
            record = None
    inputs = discover(trial, record, warn, hook_timeout_s)
    if not inputs:
        warn(f"{trial}: nothing to merge (no benchmark rank_*_metrics.jsonl or torch_profiler "
             "trace, no trace named by a collector's timeline_sources)")
        return None
    ranks = sorted(r for r in inputs if selection.ranks is None or r in selection.ranks)
    if not ranks:
        warn(f"{trial}: no rank in --ranks {selection.to_json()['ranks']} "
             f"(ranks there: {', '.join(map(str, sorted(inputs)))}); nothing written")
        return None
    origin, origin_from = _origin(trial, record, inputs, warn)
    m = _Merge(trial, selection, record, warn, origin, origin_from,
               placement=place_ranks(align, trial, {r: inputs[r] for r in ranks}, warn))
    path = Path(output) if output is not None else trial / TIMELINE_NAME
    with TraceWriter(path) as writer:
        for rank in ranks:
            _merge_rank(m, rank, inputs[rank], writer)
        events: dict[str, int] = defaultdict(int)
        for source in m.sources:
            events[source["kind"]] += source["events"]
        writer.close({
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": m.origin or 0,
            "otherData": {"aorta_timeline": 1, "trial": str(trial.resolve()),
                          "origin_unix_ns": m.origin or 0, "origin": m.origin_from or "none",
                          "selection": selection.to_json(), "ranks": ranks,
                          "sources": m.sources, "clock_checks": m.clock_checks,
                          "align": align, "rank_alignment": m.placement.entries},
        })
    return Timeline(path, ranks, dict(events))


def trial_dirs(path: Path) -> list[Path]:
    """A sweep output's trial folders (``cells/*/trial_*``), a cell folder's (``trial_*`` with
    a record), or ``[path]`` for one trial or a folder of traces."""
    if (path / "cells").is_dir():
        return sorted(p for p in path.glob("cells/*/trial_*") if p.is_dir())
    return sorted(p for p in path.glob("trial_*") if (p / RECORD_NAME).is_file()) or [path]


def timeline_step(cell: Cell) -> Callable[[Path, Mapping[str, Any]], None] | None:
    """The trial step that writes ``timeline.json`` when ``cell`` asks for it (``timeline=true``),
    for :func:`aorta_core.engine.trial.run_trial`'s ``after_run``; ``None`` otherwise."""
    if not cell.timeline:
        return None
    return lambda trial_dir, record: write_trial_timeline(trial_dir, record, cell.hook_timeout_s)


def write_trial_timeline(trial_dir: Path, record: Mapping[str, Any] | None = None,
                         hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S) -> Path | None:
    """``<trial_dir>/timeline.json`` with every rank and source (the sweep's ``timeline=true``).

    Call it before retention prunes the traces; pass the record being built when
    ``record.json`` is not written yet (its ``started_at_unix``, ``wall_time_s`` and
    ``collectors`` are used). Never raises: a problem is a warning and ``None``.
    """
    try:
        done = build_timeline(Path(trial_dir), record=record, hook_timeout_s=hook_timeout_s)
    except Exception as exc:  # the trial's results matter more than its timeline
        warning_line(f"no timeline for {trial_dir} ({exception_line(exc)})")
        return None
    return done.path if done else None
