"""``aorta timeline``: one Trace Event Format file per trial, every rank and source on one clock.

Per rank, as ``rank <R> · ...`` processes sorted rank by rank:

- Kineto traces (``torchprof/``, the benchmark's ``benchmark/torch_profiler/``): ``ts`` µs +
  ``baseTimeNanoseconds`` is Unix time (Kineto converts its clocks to it; HTA reads it so);
- the built-in benchmark's ``benchmark/rank_<RR>_metrics.jsonl``: an iteration slice from its
  ``time_*_unix_ns`` (``time.time_ns()``), phase and collective slices, step time and overlap
  ratio as counters;
- Proton ``data=trace`` files (``proton/*.chrome_trace``): their times count from the first
  kernel with no absolute anchor, so a trace is centred in the span it must lie in (the
  benchmark's iterations in env mode, else the trial's run) and half the slack is its bound.

Output ``ts`` are µs after the origin (``otherData.origin_unix_ns``): the trial's start from its
record, else the first benchmark iteration, else the first Kineto event of the first rank read.
``--window`` counts ms from it. Ranks are read one at a time and written as they are read.
docs/reports.md "Merged timeline" says how far off each alignment can be.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from aorta_core.benchmark.schema import RankRecord, decode_line
from aorta_core.benchmark.stream_overlap import COMM_KINDS
from aorta_core.files import FileRefused, read_limited
from aorta_core.intervals import merged
from aorta_core.oneline import exception_line
from aorta_core.progress import warning_line
from aorta_core.records import RECORD_NAME, BadRecord, load_record
from aorta_core.reports.overlap_report import GLOB as JSONL_GLOB
from aorta_core.reports.trace_events import (
    Event,
    Lanes,
    TraceDoc,
    TraceWriter,
    rank_from_name,
    rank_in_head,
    raw,
    read_trace,
)

TIMELINE_NAME = "timeline.json"
KINETO_DIRS = ("torchprof", "benchmark/torch_profiler")
PROTON_GLOB = "proton/*.chrome_trace"
#: Kineto's CPU clock vs ``time.time_ns()`` on one host: within [-2.1, +3.2] µs over 2000
#: ranges (torch 2.13, docs/reports.md); the bound we state for Kineto events.
KINETO_BOUND_MS = 0.005
_BENCHMARK, _KINETO, _PROTON = 0, 1, 2  # order of a rank's lanes
_ANNOTATIONS = frozenset({"user_annotation", "gpu_user_annotation"})

Warn = Callable[[str], None]
Window = tuple[float, float]


@dataclass(frozen=True)
class Selection:
    """What to keep: ranks, ``ProfilerStep#N``/benchmark steps, a window in ms after the origin."""

    ranks: frozenset[int] | None = None
    steps: frozenset[int] | None = None
    window_ms: tuple[float | None, float | None] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ranks": sorted(self.ranks) if self.ranks is not None else None,
                "steps": sorted(self.steps) if self.steps is not None else None,
                "window_ms": list(self.window_ms) if self.window_ms is not None else None}


def parse_ints(text: str) -> frozenset[int]:
    """``"0,2-3"`` -> {0, 2, 3}; ``ValueError`` on anything else."""
    out: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            first = last = -1
        if first < 0 or last < first:
            raise ValueError(f"{part.strip()!r} is not N or A-B (0 <= A <= B)")
        out.update(range(first, last + 1))
    return frozenset(out)


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``"START:END"`` in ms (either side may be empty); ``ValueError`` on anything else."""
    start, colon, end = text.partition(":")
    try:
        low = float(start) if start.strip() else None
        high = float(end) if end.strip() else None
    except ValueError:
        colon = ""
    if not colon or (low is not None and high is not None and high < low):
        raise ValueError(f"{text!r} is not START:END in ms with START <= END")
    return low, high


@dataclass
class _RankInputs:
    kineto: list[Path] = field(default_factory=list)
    jsonl: Path | None = None
    proton: list[Path] = field(default_factory=list)


def _discover(trial: Path) -> dict[int, _RankInputs]:
    """Every source file of a trial by rank; ranks come from names inside the trial folder
    (and from Kineto's ``distributedInfo``), never from the folders above it."""
    ranks: dict[int, _RankInputs] = defaultdict(_RankInputs)

    def named(path: Path) -> int:
        return rank_from_name(path.relative_to(trial))

    def regular(paths: Iterable[Path]) -> list[Path]:  # aorta reads no links
        return sorted(p for p in paths if p.is_file() and not p.is_symlink())

    for folder in KINETO_DIRS:
        for path in regular((trial / folder).rglob("*")):
            if path.name.endswith((".json", ".json.gz")):
                head = rank_in_head(path)
                ranks[named(path) if head is None else head].kineto.append(path)
    for path in regular((trial / "benchmark").glob(JSONL_GLOB)):
        ranks[named(path)].jsonl = path
    for path in regular(trial.glob(PROTON_GLOB)):
        ranks[named(path)].proton.append(path)
    return dict(ranks)


def _record_start(record: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(trial start in Unix ns, its resolution in ns) from a trial record."""
    if not record:
        return None
    exact = record.get("started_at_unix")
    if isinstance(exact, int | float) and not isinstance(exact, bool):
        return int(exact * 1e9), 0
    text = record.get("started_at")
    try:
        return int(datetime.fromisoformat(str(text)).timestamp()) * 10**9, 10**9
    except ValueError:
        return None


def _iterations(path: Path, warn: Warn) -> list[RankRecord]:
    """The rank's benchmark records, by start time; lines of another schema are skipped."""
    try:
        lines = read_limited(path).splitlines()  # a FIFO, a device or a huge file is refused
    except FileRefused as exc:
        warn(f"skipping {exc}")
        return []
    except OSError as exc:
        warn(f"skipping {path}: {exc.strerror}")
        return []
    out, bad = [], []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(decode_line(line))
            except msgspec.DecodeError:
                bad.append(number)
    if bad:
        warn(f"{path}: {len(bad)} line(s) skipped, not aorta's benchmark telemetry "
             f"(first: line {bad[0]})")
    return sorted(out, key=lambda r: r.time_start_unix_ns)


@dataclass
class _KinetoStep:
    step: int
    cat: str
    start_ns: int
    end_ns: int


def _profiler_steps(doc: TraceDoc) -> list[_KinetoStep]:
    """Every ``ProfilerStep#N`` slice (CPU annotation and its GPU projection), in Unix ns."""
    base, out = doc.baseTimeNanoseconds or 0, []
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

    def us(self, unix_ns: int) -> float:
        """Output time (µs after the origin) of a Unix time in ns."""
        return (unix_ns - (self.origin or 0)) / 1000

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
              process: Callable[[Any], Any], thread_label: Callable[[Any, Any], str]
              ) -> list[Event]:
        """Shift, select and renumber one input file's events; its ``M`` events are kept for
        the rank's end, where those of lanes that got events are forwarded. ``process(pid)``
        is the output process of an input pid. Mutates the events: the decoded file is not
        used afterwards."""
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
            t = ts + shift_us
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


def _kineto_labels(events: list[Event]) -> dict[Any, tuple[str, tuple[Any, ...]]]:
    """Input pid -> (our label, sort key) from Kineto's process metadata."""
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
        out[pid] = (f"Kineto {label}", (index if isinstance(index, int) else math.inf, str(pid)))
    return out


def _lane_label(pid: Any, tid: Any) -> str:
    """A default thread name: Kineto names its CPU threads and streams itself."""
    if isinstance(pid, int) and isinstance(tid, int):
        return f"thread {tid}"
    return " / ".join(str(x) for x in (pid, tid) if x not in ("", UNSET)) or "instants"


def _merge_kineto(m: _Merge, rank: int, path: Path, doc: TraceDoc,
                  keep: Callable[[float, float], bool] | None) -> list[Event]:
    labels = _kineto_labels(doc.traceEvents)

    def process(pid: Any) -> Any:
        if not isinstance(pid, int):  # the "Spans"/"Traces" markers: one lane group
            return m.lanes.process(rank, "kineto", _KINETO, "markers", "Kineto markers",
                                   (math.inf, "~"))
        label, order = labels.get(pid, (f"Kineto pid {pid}", (math.inf, str(pid))))
        return m.lanes.process(rank, "kineto", _KINETO, pid, label, order)

    shift = m.us(doc.baseTimeNanoseconds or 0)
    out = m.remap(doc.traceEvents, shift, keep, process, _lane_label)
    m.sources.append({"rank": rank, "kind": "kineto", "file": str(path.relative_to(m.trial)),
                      "events": len(out), "alignment": "baseTimeNanoseconds",
                      "error_bound_ms": KINETO_BOUND_MS})
    return out


def _clock_check(rank: int, iterations: list[RankRecord], steps: list[_KinetoStep]
                 ) -> dict[str, Any] | None:
    """Each iteration runs inside its ``ProfilerStep#N`` (the profiler steps after the JSONL
    line is written), so Kineto's clock minus the wall clock lies in [lo, hi]."""
    cpu = {s.step: s for s in steps if s.cat == "user_annotation"}
    pairs = [(cpu[it.global_step], it) for it in iterations if it.global_step in cpu]
    if not pairs:
        return None
    low = max(s.start_ns - it.time_start_unix_ns for s, it in pairs)
    high = min(s.end_ns - it.time_end_unix_ns for s, it in pairs)
    return {"rank": rank, "steps": len(pairs), "kineto_minus_wall_us": [low / 1000, high / 1000]}


def _merge_benchmark(m: _Merge, rank: int, path: Path, iterations: list[RankRecord],
                     keep: Callable[[float, float], bool] | None) -> list[Event]:
    """Iteration, phase and collective slices; step time and overlap counters."""
    proc = m.lanes.process(rank, "benchmark", _BENCHMARK, None, "benchmark")
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


def _proton_span(m: _Merge, path: Path, iterations: list[RankRecord], length_ns: int
                 ) -> tuple[int, int, str] | None:
    """The span a Proton trace of ``length_ns`` must lie in, and what says so."""
    collectors = (m.record or {}).get("collectors")
    proton = collectors.get("proton") if isinstance(collectors, dict) else None
    options = proton.get("options") if isinstance(proton, dict) else None
    if iterations and isinstance(options, dict) and options.get("mode") == "env":
        low, high = iterations[0].time_start_unix_ns, iterations[-1].time_end_unix_ns
        if high - low >= length_ns:
            return low, high, "benchmark_iterations"
    start = _record_start(m.record)
    wall = (m.record or {}).get("wall_time_s")
    if start is None or not isinstance(wall, int | float):
        return None
    low, high = start[0], start[0] + start[1] + int(wall * 1e9)
    mtime = path.stat().st_mtime_ns
    if low <= mtime <= high:  # written at finalize, after the last kernel
        high = mtime
    return (low, high, "run_window") if high - low >= length_ns else None


def _merge_proton(m: _Merge, rank: int, path: Path, doc: TraceDoc, iterations: list[RankRecord],
                  keep: Callable[[float, float], bool] | None) -> list[Event]:
    """Place a Proton trace in the middle of the span it must lie in (half the slack is the
    error bound); with no span known it starts at the origin, unaligned."""
    timed = [ev for ev in doc.traceEvents if ev.ph != "M" and ev.ts is not UNSET]
    first = min((ev.ts for ev in timed), default=0.0)
    length_ns = round((max((ev.ts + (ev.dur or 0) for ev in timed), default=first) - first)
                      * 1000)
    span = _proton_span(m, path, iterations, length_ns)
    if span is None:
        start, bound, method = m.origin or 0, None, "unaligned"
        m.warn(f"{path}: no anchor for a Proton trace (no benchmark iterations in env mode, no "
               "run span in record.json); placed at the timeline's origin, not aligned")
    else:
        low, high, method = span
        slack = high - low - length_ns
        start, bound = low + slack // 2, round(slack / 2 / 1e6, 6)

    def process(pid: Any) -> Any:
        label = f"Proton {path.name}" + ("" if pid is UNSET else f" ({pid})")
        return m.lanes.process(rank, "proton", _PROTON, (path, pid), label, (str(path),))

    out = m.remap(doc.traceEvents, m.us(start) - first, keep, process,
                  lambda _, tid: f"stream {tid}" if isinstance(tid, int) else str(tid))
    m.sources.append({"rank": rank, "kind": "proton", "file": str(path.relative_to(m.trial)),
                      "events": len(out), "alignment": method, "error_bound_ms": bound,
                      "first_event_unix_ns": start})
    return out


def _read_traces(paths: list[Path], warn: Warn, anchored: bool) -> list[tuple[Path, TraceDoc]]:
    out = []
    for path in paths:
        try:
            doc = read_trace(path)
        except ValueError as exc:
            warn(f"skipping {path}: {exc}")
            continue
        if anchored and doc.baseTimeNanoseconds is None:
            warn(f"skipping {path}: no baseTimeNanoseconds, so it cannot be put on the clock")
            continue
        out.append((path, doc))
    return out


def _merge_rank(m: _Merge, rank: int, inputs: _RankInputs, writer: TraceWriter) -> None:
    """Read one rank's files, write its events and lane metadata, then let them go."""
    kineto = _read_traces(inputs.kineto, m.warn, anchored=True)
    iterations = _iterations(inputs.jsonl, m.warn) if inputs.jsonl else []
    if m.origin is None and kineto:
        m.origin = min((doc.baseTimeNanoseconds + round(ev.ts * 1000) for _, doc in kineto
                        for ev in doc.traceEvents if ev.ph != "M" and ev.ts is not UNSET),
                       default=None)
        m.origin_from = f"first Kineto event of rank {rank}"
    steps = [s for _, doc in kineto for s in _profiler_steps(doc)]
    windows = m.windows(iterations, steps)
    if windows == []:
        m.warn(f"rank {rank}: nothing in the selection ({m.selection.to_json()})")
    keep = _keeper(windows)
    check = _clock_check(rank, iterations, steps)
    if check:
        m.clock_checks.append(check)
    if inputs.jsonl:
        writer.write(_merge_benchmark(m, rank, inputs.jsonl, iterations, keep))
    for path, doc in kineto:
        writer.write(_merge_kineto(m, rank, path, doc, keep))
    for path, doc in _read_traces(inputs.proton, m.warn, anchored=False):
        writer.write(_merge_proton(m, rank, path, doc, iterations, keep))
    writer.write(m.lanes.close_rank(rank, m.forwarded))
    m.forwarded.clear()


def _origin(record: Mapping[str, Any] | None, ranks: dict[int, _RankInputs]
            ) -> tuple[int | None, str]:
    start = _record_start(record)
    if start is not None:
        return start[0], "record started_at_unix" if start[1] == 0 else "record started_at"
    firsts = [its[0].time_start_unix_ns for r in ranks.values() if r.jsonl
              if (its := _iterations(r.jsonl, lambda _: None))]
    if firsts:
        return min(firsts), "first benchmark iteration"
    return None, ""


@dataclass(frozen=True)
class Timeline:
    """What was written: the file, its ranks and the events per source kind."""

    path: Path
    ranks: list[int]
    events: dict[str, int]


def build_timeline(trial: Path, output: Path | None = None, selection: Selection = Selection(),
                   record: Mapping[str, Any] | None = None, warn: Warn = warning_line
                   ) -> Timeline | None:
    """Merge one trial's traces into ``output`` (default ``<trial>/timeline.json``; ``.gz``
    compresses). ``record`` defaults to the trial's ``record.json``. ``None`` when the trial
    holds no source; unreadable inputs are skipped with a warning naming the file."""
    trial = Path(trial)
    inputs = _discover(trial)
    if not inputs:
        warn(f"{trial}: no Kineto trace, benchmark rank_*_metrics.jsonl or Proton "
             ".chrome_trace to merge")
        return None
    if record is None:
        try:
            record = msgspec.to_builtins(load_record(trial / RECORD_NAME))
        except (FileNotFoundError, BadRecord):
            record = None
    ranks = sorted(r for r in inputs if selection.ranks is None or r in selection.ranks)
    if not ranks:
        warn(f"{trial}: no rank in --ranks {sorted(selection.ranks or ())} "
             f"(ranks there: {', '.join(map(str, sorted(inputs)))}); nothing written")
        return None
    origin, origin_from = _origin(record, inputs)
    m = _Merge(trial, selection, record, warn, origin, origin_from)
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
                          "sources": m.sources, "clock_checks": m.clock_checks},
        })
    return Timeline(path, ranks, dict(events))


def trial_dirs(path: Path) -> list[Path]:
    """A sweep output's trial folders (``cells/*/trial_*``), or ``[path]`` for one trial."""
    if (path / "cells").is_dir():
        return sorted(p for p in path.glob("cells/*/trial_*") if p.is_dir())
    return [path]


def write_trial_timeline(trial_dir: Path, record: Mapping[str, Any] | None = None
                         ) -> Path | None:
    """``<trial_dir>/timeline.json`` with every rank and source (the sweep's ``timeline=true``).

    Call it before retention prunes the traces; pass the record being built when
    ``record.json`` is not written yet (its ``started_at_unix``, ``wall_time_s`` and
    ``collectors`` are used). Never raises: a problem is a warning and ``None``.
    """
    try:
        done = build_timeline(Path(trial_dir), record=record)
    except Exception as exc:  # the trial's results matter more than its timeline
        warning_line(f"no timeline for {trial_dir} ({exception_line(exc)})")
        return None
    return done.path if done else None
