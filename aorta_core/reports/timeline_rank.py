"""One rank of ``aorta timeline``: its sources read, placed on the output clock, selected and
written as a fragment of events, in a worker process of its own.

An 8-GPU node's ranks write 0.1-2 GB traces each: merged in one process they are read one after
another and the process holds the largest decoded (about 4x its file). Here each rank is merged
where :func:`~aorta_core.api.parallel.parallel_map` runs it; what comes back is the fragment's
file and the rank's few summaries (its sources, clock checks, notes), which
:func:`aorta_core.reports.timeline.build_timeline` splices into the output in rank order. Lane
ids are unique over the file without a shared counter (:class:`~.trace_events.Lanes`).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from aorta_core.api.intervals import merged
from aorta_core.api.parallel import decoded_bytes
from aorta_core.benchmark.schema import RankRecord
from aorta_core.benchmark.stream_overlap import COMM_KINDS
from aorta_core.reports.clock_check import ClockCheck, check_clock
from aorta_core.reports.relative_traces import place_relative
from aorta_core.reports.timeline_inputs import (
    BENCHMARK_POSITION,
    RankInputs,
    Trace,
    read_telemetry,
)
from aorta_core.reports.timeline_selection import Ints
from aorta_core.reports.trace_events import (
    UNIX_NS_LIMIT,
    Event,
    EventStream,
    Lanes,
    TraceDoc,
    off_the_clock,
    on_the_clock,
    raw,
    read_trace,
)

if TYPE_CHECKING:
    from aorta_core.reports.rank_alignment import RankClock
    from aorta_core.reports.timeline_selection import Selection

#: Before 2001-09-09 in Unix ns: a "unix" trace whose events start earlier counts from
#: something else (its own start, boot), so it cannot be put on the clock.
_UNIX_NS_MIN = 10**18
_ANNOTATIONS = frozenset({"user_annotation", "gpu_user_annotation"})
#: A rank's merge holds its decoded traces at once: about this many bytes per byte of them.
_MEMORY_PER_BYTE = 4

Warn = Callable[[str], None]
Window = tuple[float, float]


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


@dataclass(frozen=True)
class RankJob:
    """What a worker needs to merge one rank into ``fragment``."""

    trial: Path
    rank: int
    inputs: RankInputs
    selection: Selection
    record: Mapping[str, Any] | None
    origin: int | None
    #: The rank's host clock's mapping onto the reference rank's (``None``: its own clock).
    clock: RankClock | None
    #: Whether a trace's clock check moves it (``--align`` other than ``none``).
    apply_checks: bool
    #: The rank's output pids and tids: ``first_lane_id``, then every ``lane_id_step``-th; its
    #: first block of flow ids.
    first_lane_id: int
    lane_id_step: int
    first_flow_block: int
    fragment: Path


@dataclass(frozen=True)
class RankMerged:
    """What a rank's merge gives back: the events written to its fragment, what
    ``otherData.sources`` and ``clock_checks`` say of its files, its warnings in order."""

    events: int
    sources: list[dict[str, Any]]
    clock_checks: list[dict[str, Any]]
    notes: list[str]
    #: False when the selection left nothing of the rank (only its lanes' names were written).
    selected: bool = True


@dataclass
class _Merge:
    """One rank's merge in progress."""

    trial: Path
    selection: Selection
    record: Mapping[str, Any] | None
    warn: Warn
    origin: int | None
    clock: RankClock | None
    apply_checks: bool
    lanes: Lanes
    rank: int = 0
    sources: list[dict[str, Any]] = field(default_factory=list)
    clock_checks: list[dict[str, Any]] = field(default_factory=list)
    forwarded: list[Any] = field(default_factory=list)

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
        return check.shift_ns if check is not None and self.apply_checks else 0

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
        shift, placed = place_relative(m, trace, doc, iterations)
    out = m.remap(doc.traceEvents, shift, keep, _processes(m, rank, trace, doc),
                  _thread_label(source.thread_name), rate)
    m.sources.append({"rank": rank, "kind": trace.kind,
                      "file": str(source.path.relative_to(m.trial)), "events": len(out),
                      **placed})
    return out


class _Timed(msgspec.Struct, gc=False):
    """What finding a trace's first event reads of each event."""

    ph: str = ""
    ts: float | msgspec.UnsetType = UNSET
    dur: float | msgspec.UnsetType = UNSET


class _TimedDoc(msgspec.Struct, gc=False):
    traceEvents: list[_Timed]
    baseTimeNanoseconds: int | None = None


_TIMED = msgspec.json.Decoder(_TimedDoc)


def _unix_ns(doc: Any) -> Iterator[int]:
    """Unix time of each timed event of a ``unix`` trace, in the file's order."""
    base = doc.baseTimeNanoseconds or 0
    return (base + round(ev.ts * 1000) for ev in doc.traceEvents
            if ev.ph != "M" and ev.ts is not UNSET)


def _read_traces(trial: Path, traces: list[Trace], warn: Warn,
                 decoder: msgspec.json.Decoder | None = None) -> list[tuple[Trace, Any]]:
    """Each readable trace (decoded by ``decoder``, default every field); the others are
    skipped with one line each."""
    out = []
    for trace in traces:
        path = trace.source.path
        try:
            doc = read_trace(path, trial, decoder)
        except ValueError as exc:
            warn(f"skipping {path}: {exc}")
            continue
        base_us = (doc.baseTimeNanoseconds or 0) / 1e3 if trace.source.clock == "unix" else 0
        events = on_the_clock(doc.traceEvents, base_us)
        if len(events) < len(doc.traceEvents):
            warn(off_the_clock(path, len(doc.traceEvents) - len(events)))
            doc.traceEvents = events
        first = next(_unix_ns(doc), None) if trace.source.clock == "unix" else None
        if first is not None and not _UNIX_NS_MIN <= first < UNIX_NS_LIMIT:
            warn(f"skipping {path}: its times are not Unix time (an event at {first} ns; "
                 "no baseTimeNanoseconds?), so it cannot be put on the clock")
            continue
        out.append((trace, doc))
    return out


def first_event(job: tuple[Path, RankInputs]) -> tuple[int, str] | None:
    """A rank's first event on a Unix-clock trace (Unix ns) and that trace's label: the
    timeline's origin when no record or telemetry gives one. Reads only what that needs."""
    trial, inputs = job
    unix = [t for t in inputs.traces if t.source.clock == "unix"]
    firsts = [(first, trace.label) for trace, doc in _read_traces(trial, unix, lambda _: None,
                                                                   _TIMED)
              if (first := min(_unix_ns(doc), default=None)) is not None]
    return min(firsts, default=None)


def merge_need(job: RankJob) -> int:
    """The bytes :func:`merge_rank` holds at its peak, for the workers' memory plan."""
    sizes = []
    for trace in job.inputs.traces:
        try:
            sizes.append(decoded_bytes(trace.source.path))
        except OSError:
            continue  # the merge's read says why
    return _MEMORY_PER_BYTE * sum(sizes)


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


def merge_rank(job: RankJob) -> RankMerged:
    """Read one rank's files and write its events and lane metadata to ``job.fragment``."""
    notes: list[str] = []
    m = _Merge(job.trial, job.selection, job.record, notes.append, job.origin, job.clock,
               job.apply_checks, Lanes(job.first_lane_id, job.lane_id_step, job.first_flow_block),
               job.rank)
    rank, inputs = job.rank, job.inputs
    traces = _read_traces(m.trial, inputs.traces, m.warn)
    unix = [(trace, doc) for trace, doc in traces if trace.source.clock == "unix"]
    iterations = read_telemetry(inputs.jsonl, m.warn) if inputs.jsonl else []
    checks = {id(doc): _checked(m, rank, trace, doc, iterations) for trace, doc in unix}
    steps = [s for _, doc in unix for s in _profiler_steps(doc, m.shift_ns(checks[id(doc)]))]
    windows = m.windows(iterations, steps)
    if windows == []:
        found = {st.step for st in steps} | {it.global_step for it in iterations}
        there = Ints((step, step) for step in found)
        m.warn(f"rank {rank}: nothing in the selection ({m.selection.text()}); its steps: "
               f"{there.text() or 'none'}")
    keep = _keeper(windows)
    with job.fragment.open("wb") as fh:
        stream = EventStream(fh)
        if inputs.jsonl:
            stream.write(_merge_benchmark(m, rank, inputs.jsonl, iterations, keep))
        for trace, doc in traces:
            stream.write(_merge_trace(m, rank, trace, doc, iterations, keep,
                                      checks.get(id(doc))))
        stream.write(m.lanes.close_rank(rank, m.forwarded))
    return RankMerged(stream.count, m.sources, m.clock_checks, notes, windows != [])
