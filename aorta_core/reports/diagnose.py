"""``aorta diagnose``: why is a step slow, on which rank, and who waits for it.

Reads the Kineto traces of every rank of a trial (the benchmark's profiling block, and each
collector's ``timeline_sources``: :func:`~aorta_core.reports.timeline_inputs.discover`) and
writes ``diagnosis.json``: per rank and ``ProfilerStep#N`` the step's time split into parts that
sum to it, the stragglers, and findings ranked by the ms at stake. docs/diagnose.md has the
definitions and how they differ from HolisticTraceAnalysis's.

Each instant of a step gets one label, first match wins: ``comm_hidden`` (communication while
compute runs), ``compute``, ``comm_exposed``, ``other`` (device work that is neither), ``data``
(inside a data-loading range), ``host`` (nothing of the above: the device idles while the host
runs Python, launches or sleeps). ``comm_wait`` is the part of ``comm_exposed`` a rank spends in
collectives waiting for a later rank: a collective ends together on every rank, so its duration
beyond the shortest rank's is time spent waiting for that rank to arrive (HTA's straggler
analysis reads the same fact as "late-starting communication kernels").
"""

from __future__ import annotations

import bisect
import contextlib
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
from msgspec import UNSET

from aorta_core.api.files import FileRefused, write_atomic
from aorta_core.api.intervals import merge
from aorta_core.api.oneline import exception_line
from aorta_core.api.parallel import decoded_bytes, parallel_map
from aorta_core.api.ranks import world_size_in_head
from aorta_core.benchmark.markers import ITERATION_MARKER
from aorta_core.benchmark.schema import RankRecord
from aorta_core.engine.diagnosis_section import DIAGNOSIS_NAME
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, dump_json, load_record
from aorta_core.reports.clock_check import clock_rate
from aorta_core.reports.straggler_thresholds import (
    FINDING_SHARE,
    MIN_EXCESS_MS,
    MIN_EXCESS_PCT,
    MOST_STEPS,
)
from aorta_core.reports.timeline_inputs import RankInputs, discover, read_telemetry
from aorta_core.reports.trace_events import TIME_LIMIT_US, off_the_clock, read_trace

if TYPE_CHECKING:
    from aorta_core.engine.cells import Cell

SCHEMA_VERSION = 1
#: The parts of a step, in label order; they sum to ``step_ms``. ``comm_wait_ms`` is a part of
#: ``comm_exposed_ms``.
PARTS = ("compute", "comm_hidden", "comm_exposed", "host", "data", "other")
#: What the parts are called in findings.
WORDS = {
    "compute": "compute (kernels, or CPU ops on a CPU trace)",
    "comm_hidden": "communication hidden under compute",
    "comm_exposed": "exposed communication that is not waiting for other ranks",
    "host": "host time with the device idle (outside any op: Python, launches, sleeps)",
    "data": "data loading",
    "other": "other device work (memory copies and sets)",
}

# Names. CPU side: a collective's execution (gloo's worker thread, NCCL's annotation), the
# c10d op that issues it, torch's record_param_comms; the benchmark's data range and
# torch.utils.data's iterator (:func:`_is_data`). Every test of a name is linear in its length:
# a trace may hold names of megabytes.
_COLLECTIVE = re.compile(r"^(gloo|nccl|mpi|ucc|xccl|hccl|rccl):")
_COMM = re.compile(r"^(gloo|nccl|mpi|ucc|xccl|hccl|rccl):|^c10d::|^record_param_comms$")
#: A step number int() reads at once (longer runs of digits are no step of a profiler).
_STEP = re.compile(r"^ProfilerStep#(\d{1,18})$")
#: A dispatcher op (``aten::mm``, ``prim::``, a custom ``ns::op``): CPU compute on a CPU trace.
#: Autograd's nodes (``MmBackward0``, ``autograd::engine::evaluate_function: ...``) and
#: annotations are not: time in them outside any op is the framework's and Python's (host).
_DISPATCHER = re.compile(r"^(?!autograd::|c10d::|profiler::)[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_]")
#: A torch.compile'd graph's call (``## Call CompiledFxGraph <key> ##``): on the CPU, Inductor's
#: fused C++ kernels run inside it and make no op events of their own, so it is compute too.
_COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph")
# Device side: HTA's kernel classes (hta/utils/utils.py get_kernel_type, hta/common/types.py),
# except that a kernel named hip* is not taken for communication (HTA's ^hip rule would count
# every HIP kernel as a collective).
_GPU_COMM = re.compile(r"(^nccl.*)|(^hccl)|(.*ncclKernel.*)|(^rccl)")
_GPU_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_GPU_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|"
    r"(cuda.*LaunchKernel)|(^runFunction)|(^job_exe)|(^packet)|(^pe_exe)|"
    r"(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_CPU_CATS = frozenset({"cpu_op", "user_annotation"})
_READ_CATS = _DEVICE_CATS | _CPU_CATS

Warn = Callable[[str], None]


def _empty() -> np.ndarray:
    return np.empty((2, 0))


@dataclass
class _Step:
    """One step of a rank, broken down where its trace is read (the step threads' events and
    the rank's intervals never leave that worker)."""

    #: The parts, ms; ``comm_exposed`` includes the waiting, which needs every rank.
    parts: dict[str, float]
    #: The step's exposed communication (merged, µs): the parent finds the waiting in it.
    exposed: np.ndarray
    #: The longest run of host time: (ms, the event that starts right after it).
    longest_host: tuple[float, str | None]


@dataclass
class _Trace:
    """One rank's steps (µs, the trace's clock) and their breakdowns, and its collectives."""

    device: bool = False
    steps: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: The benchmark's ``aorta.iteration#N`` starts, where the trace has them.
    iterations: dict[int, float] = field(default_factory=dict)
    breakdown: dict[int, _Step] = field(default_factory=dict)
    #: Collective executions, by start: (name, ts, dur).
    collectives: list[tuple[str, float, float]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    #: How many of its files could not be read (each said why in a warning).
    unread: int = 0
    #: The job's size as its traces' ``distributedInfo`` states it, where they do.
    world_size: int | None = None

    def rescale(self, rate: float) -> None:
        """Every time divided by ``rate`` (the trace's µs per wall-clock µs), about the first
        step's start: a trace whose clock ran ``rate`` times too fast, measured back."""
        origin = min(a for a, _ in self.steps.values())

        def at(t: float) -> float:
            return origin + (t - origin) / rate
        self.steps = {n: (at(a), at(b)) for n, (a, b) in self.steps.items()}
        self.iterations = {n: at(t) for n, t in self.iterations.items()}
        self.collectives = [(name, at(ts), dur / rate) for name, ts, dur in self.collectives]
        for step in self.breakdown.values():
            step.parts = {k: v / rate for k, v in step.parts.items()}
            step.exposed = origin + (step.exposed - origin) / rate
            step.longest_host = (step.longest_host[0] / rate, step.longest_host[1])


def _pairs(spans: list[tuple[float, float]]) -> np.ndarray:
    if not spans:
        return _empty()
    arr = np.asarray(spans, dtype=float)
    return merge(arr[:, 0], arr[:, 1])


def _inside(intervals: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Which of the points ``x`` lie in the merged ``intervals``."""
    if intervals.shape[1] == 0:
        return np.zeros(x.shape, dtype=bool)
    i = np.searchsorted(intervals[0], x, side="right") - 1
    ok = i >= 0
    return ok & (x < intervals[1][np.clip(i, 0, None)])


#: A worker's peak per byte of a rank's decoded traces, one file at a time, where a file cannot
#: be read in pieces (decoded whole: its events, the file's pages and the columns, 3.3x a 160 MB
#: trace of bench_ranks' capture); read in pieces the same file peaks at 0.8x.
_MEMORY_PER_BYTE = 4


def _rank_need(job: tuple[list[Path], Path]) -> int:
    try:
        return _MEMORY_PER_BYTE * max((decoded_bytes(p) for p in job[0]), default=0)
    except OSError:
        return 0  # the worker's read says why


def _read_rank_job(job: tuple[list[Path], Path]) -> tuple[_Trace, list[str]]:
    """:func:`read_rank` in a worker process: its notes come back with its trace."""
    notes: list[str] = []
    return read_rank(job[0], job[1], notes.append), notes


def read_ranks(paths: Mapping[int, list[Path]], root: Path, warn: Warn) -> dict[int, _Trace]:
    """Every rank's :func:`read_rank`, one rank per worker process (as ``aorta parse`` reads
    files): the parent holds only the ranks' intervals, never a decoded trace. A rank whose
    worker failed is left out, after a warning."""
    ranks = sorted(paths)
    jobs = [(paths[rank], root) for rank in ranks]
    out = {}
    for rank, done in zip(ranks, parallel_map(_read_rank_job, jobs, need=_rank_need),
                          strict=True):
        if done.error is not None:
            warn(f"rank {rank}: its traces could not be read ({done.error}); left out")
            continue
        out[rank], notes = done.value
        for line in notes:
            warn(line)
    return out


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def read_rank(paths: Iterable[Path], root: Path, warn: Warn) -> _Trace:
    """One rank's intervals from its Kineto traces (no steps: none holds a ProfilerStep). A
    file whose steps another file of the rank already gave is skipped: two profilers of the
    same steps would count each collective twice; the same step numbers at other times are
    another run's, and said."""
    out = _Trace()
    files: list[_OneFile] = []
    given: dict[int, str] = {}  # each step's file
    for path in paths:
        try:
            reader = _Reader()
            doc = read_trace(path, root, _DECODER, (_SPANS, reader.piece))
        except (ValueError, FileRefused) as exc:
            warn(f"{path}: skipped, {exc}")
            out.unread += 1
            continue
        out.world_size = out.world_size or world_size_in_head(path, root)
        columns = reader.columns(doc.traceEvents)
        del doc
        if columns.far:
            warn(off_the_clock(path, columns.far))
        steps, shown = _steps(columns), _relative(path, root)
        known = sorted(set(steps) & set(out.steps))
        if known and not any(_meet(steps[n], out.steps[n]) for n in known):
            warn(f"{path}: skipped, another run's: its ProfilerStep#{known[0]}"
                 f"{'' if len(known) == 1 else f'-#{known[-1]}'} lie at other times than in "
                 f"{given[known[0]]}; diagnose each run's traces in a folder of their own")
            continue
        if len(known) == len(steps):  # no steps, or only steps already read
            continue
        found = _read_one(columns, steps)
        files.append(found)
        given.update(dict.fromkeys(found.steps, shown))
        out.steps.update(found.steps)
        out.iterations.update(found.iterations)
        out.device = out.device or found.device
        out.collectives += found.collectives
        out.sources.append(shown)
    if not out.steps:
        return out
    intervals = {part: merge(*np.hstack([getattr(f, part) for f in files]))
                 for part in _INTERVALS}
    out.collectives.sort(key=_START)
    starts = np.concatenate([f.starts for f in files])
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    names = [name for f in files for name in f.names]
    names = [names[i] for i in order.tolist()]
    for step, (a, b) in out.steps.items():
        points, lengths, labels = _segments(intervals, a, b)
        out.breakdown[step] = _Step(
            {k: float(lengths[labels[k]].sum()) / 1e3 for k in PARTS},
            _runs(points, labels["comm_exposed"]), _longest(points, labels["host"], starts, names))
    return out


class _Span(msgspec.Struct, gc=False):
    """What the diagnosis reads of a trace event; a missing time is NaN, which every test of a
    span fails, and a missing name or category is empty."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = math.nan
    dur: float = math.nan
    pid: int | str = ""
    tid: int | str = ""


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[_Span]


_DECODER = msgspec.json.Decoder(_Doc)
_SPANS = msgspec.json.Decoder(list[_Span])


_TS, _DUR = attrgetter("ts"), attrgetter("dur")
_START = itemgetter(1)  # of a collective's (name, ts, dur)
_KEY = attrgetter("name", "cat", "pid", "tid")
#: One piece's events as columns: start, end, and the code of (name, category, pid, tid); and
#: how many of them lie off every clock.
_Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, int]


class _Codes(dict[Any, int]):
    """Gives each key the next code the first time it is seen."""

    def __missing__(self, key: Any) -> int:
        self[key] = code = len(self)
        return code


class _Reader:
    """The events of a trace that the diagnosis reads (complete, of its categories), made
    into columns one piece of the trace at a time (:func:`read_trace`'s ``pieces``): a piece's
    events are read while they are in the cache and freed before the next is decoded, so a
    file's events are never all held as objects (the same work on all of a 145 MB trace's
    events at once took 0.74 s, 0.46 s in 2 MiB pieces). An event's name,
    category and thread are one code per distinct (name, category, pid, tid): what a name is,
    is decided once per code, not per event."""

    def __init__(self) -> None:
        self._keys = _Codes()

    def piece(self, events: list[_Span]) -> list[_Chunk]:
        """A time or duration beyond :data:`TIME_LIMIT_US` (``1e308``) makes the event's start
        NaN, which fails every test of a span, as a missing time does; it is counted."""
        xs = [e for e in events if e.ph == "X" and e.cat in _READ_CATS]
        n = len(xs)
        ts, dur = (np.fromiter(map(get, xs), float, n) for get in (_TS, _DUR))
        far = (np.abs(ts) > TIME_LIMIT_US) | (np.abs(dur) > TIME_LIMIT_US)  # NaN is not far
        ts[far] = np.nan
        return [(ts, ts + dur, np.fromiter(map(self._keys.__getitem__, map(_KEY, xs)), np.intp,
                                           n), int(far.sum()))]

    def columns(self, chunks: list[_Chunk]) -> _Columns:
        return _Columns(chunks, list(self._keys))


@dataclass
class _OneFile:
    """One file's spans as ``[2, k]`` arrays (start, end; not merged)."""

    device: bool
    steps: dict[int, tuple[float, float]]
    iterations: dict[int, float]
    compute: np.ndarray
    comm: np.ndarray
    other: np.ndarray
    data: np.ndarray
    collectives: list[tuple[str, float, float]]
    #: The starts of the CPU events on the step threads, and their names.
    starts: np.ndarray
    names: list[str]


# What a name is, decided once per (name, category): names repeat thousands of times.
_OTHER, _STEP_RANGE, _COMM_RANGE, _COLLECTIVE_RANGE, _DATA_RANGE, _OP = range(6)
_KERNEL_COMPUTE, _KERNEL_COMM, _KERNEL_OTHER = range(6, 9)
_ITERATION_RANGE = 9


def _is_data(name: str) -> bool:
    """A data-loading range: the benchmark's ``aorta.data``, or torch.utils.data's iterator
    (``enumerate(DataLoader)#...``, ``..._DataLoaderIter.__next__``). Two ``str.find``: the
    regex ``DataLoader.*__next__`` searched a name again from each ``DataLoader`` in it, 28 s
    for one name of 640 KB."""
    if name == "aorta.data" or name.startswith("enumerate(DataLoader)"):
        return True
    at = name.find("DataLoader")
    return at >= 0 and name.find("__next__", at + len("DataLoader")) >= 0


def _kind(name: str, cat: str) -> int:
    if cat in _DEVICE_CATS:
        if _GPU_COMM.match(name):
            return _KERNEL_COMM
        if _GPU_MEMORY.match(name) or _GPU_NOT_COMPUTE.match(name):
            return _KERNEL_OTHER
        return _KERNEL_COMPUTE
    if cat not in _CPU_CATS:
        return _OTHER
    if _STEP.match(name):
        return _STEP_RANGE
    if _COMM.match(name):
        return _COLLECTIVE_RANGE if _COLLECTIVE.match(name) else _COMM_RANGE
    if _is_data(name):
        return _DATA_RANGE
    if name.startswith(ITERATION_MARKER):
        return _ITERATION_RANGE
    if _COMPILED_GRAPH.match(name) or (cat == "cpu_op" and _DISPATCHER.match(name)):
        return _OP
    return _OTHER


class _Columns:
    """A file's events that the diagnosis reads, as columns (:class:`_Reader`'s chunks and the
    (name, category, pid, tid) of each code): per-event work is numpy's."""

    def __init__(self, chunks: list[_Chunk], keys: list[tuple[Any, ...]]) -> None:
        ts, end, key, far = zip(*chunks, strict=True)
        self.ts, self.end, self.key = (np.concatenate(c) for c in (ts, end, key))
        self.far = sum(far)  # events left out, their time off every clock
        shared: dict[str, str] = {}
        self.key_names = [shared.setdefault(name, name) for name, _, _, _ in keys]
        kinds = {(name, cat): _kind(name, cat) for name, cat, _, _ in keys}
        threads = _Codes()
        per_key = np.array([(kinds[name, cat], cat in _CPU_CATS, name.startswith("c10d::"),
                             threads[pid, tid]) for name, cat, pid, tid in keys],
                           np.intp).reshape(-1, 4)
        # each column gathered alone: a view of one (events x 4) gather would keep all of it
        self.kind, self.cpu, self.c10d, self.thread = (
            column[self.key] for column in (per_key[:, 0], per_key[:, 1].astype(bool),
                                            per_key[:, 2].astype(bool), per_key[:, 3]))
        self.ok = self.end >= self.ts  # NaN (no ts or no dur) and negative durations fail

    def of(self, *kinds: int) -> np.ndarray:
        """The complete events of these kinds."""
        return self.ok & np.isin(self.kind, kinds)

    def spans(self, mask: np.ndarray) -> np.ndarray:
        return np.vstack((self.ts[mask], self.end[mask]))

    def names(self, mask: np.ndarray) -> list[str]:
        """The names of the masked events (one shared object per distinct name: a rank's result
        crosses from its worker pickled once per name, not once per event)."""
        return list(map(self.key_names.__getitem__, self.key[mask].tolist()))

    def timed(self, mask: np.ndarray) -> list[tuple[str, float, float]]:
        """(name, ts, dur) of the masked events."""
        return list(zip(self.names(mask), self.ts[mask].tolist(),
                        (self.end - self.ts)[mask].tolist(), strict=True))


def _steps(col: _Columns) -> dict[int, tuple[float, float]]:
    """A file's ``ProfilerStep#N`` ranges by N."""
    step = col.of(_STEP_RANGE)
    return {int(name.rpartition("#")[2]): (a, b) for name, a, b in zip(
        col.names(step), col.ts[step].tolist(), col.end[step].tolist(), strict=True)}


def _meet(x: tuple[float, float], y: tuple[float, float]) -> bool:
    return x[0] < y[1] and y[0] < x[1]


def _read_one(col: _Columns, steps: dict[int, tuple[float, float]]) -> _OneFile:
    step = col.of(_STEP_RANGE)
    on_steps = col.ok & col.cpu & ~step & np.isin(col.thread, col.thread[step])
    marked = col.of(_ITERATION_RANGE)
    iterations = {}
    for name, start in zip(col.names(marked), col.ts[marked].tolist(), strict=True):
        with contextlib.suppress(ValueError):  # a name of ours with no number after it
            iterations[int(name[len(ITERATION_MARKER):])] = start
    data = col.spans(col.of(_DATA_RANGE))
    starts, names = col.ts[on_steps], col.names(on_steps)
    kernels = col.of(_KERNEL_COMPUTE, _KERNEL_COMM, _KERNEL_OTHER)
    if kernels.any():
        return _OneFile(True, steps, iterations, col.spans(col.of(_KERNEL_COMPUTE)),
                        col.spans(col.of(_KERNEL_COMM)), col.spans(col.of(_KERNEL_OTHER)), data,
                        col.timed(col.of(_KERNEL_COMM)), starts, names)
    # an op inside a collective (gloo's copies) or the data step of its thread is not compute
    comm = col.of(_COMM_RANGE, _COLLECTIVE_RANGE)
    op = col.of(_OP)
    mids = (col.ts + col.end) / 2
    away = _inside(merge(*data), mids)
    away[op] |= _inside_own_thread(col, comm, op, mids)
    # without execution ranges (older torch) a collective is its c10d op
    collectives = col.timed(col.of(_COLLECTIVE_RANGE)) or col.timed(
        col.of(_COMM_RANGE) & col.c10d)
    return _OneFile(False, steps, iterations, col.spans(op & ~away), col.spans(comm),
                    np.empty((2, 0)), data, collectives, starts, names)


def _inside_own_thread(col: _Columns, spans: np.ndarray, points: np.ndarray, x: np.ndarray
                       ) -> np.ndarray:
    """Which ``points`` (a mask of the events) have their ``x`` inside one of the ``spans`` (a
    mask) of their own thread: every thread at once (a pass over the events per thread took
    47 s for 100,000 threads). Each time becomes its rank among all of them, and each thread's
    ranks a block of their own (thread x count + rank), so one sort of the spans' starts and a
    running maximum of their ends answer every point exactly: it is inside where the furthest
    end of its thread's spans that start at or before it lies after it."""
    count = int(spans.sum())
    if not count:
        return np.zeros(int(points.sum()), dtype=bool)
    _, rank = np.unique(np.concatenate((col.ts[spans], col.end[spans], x[points])),
                        return_inverse=True)
    block = np.int64(rank.size + 1)
    own = col.thread[spans].astype(np.int64) * block
    starts, ends = own + rank[:count], own + rank[count:2 * count]
    order = np.argsort(starts, kind="stable")
    starts, reach = starts[order], np.maximum.accumulate(ends[order])
    at = col.thread[points].astype(np.int64) * block + rank[2 * count:]
    i = np.searchsorted(starts, at, side="right") - 1
    return (i >= 0) & (reach[np.clip(i, 0, None)] > at)


# --- the breakdown ---------------------------------------------------------------------------

def _clip(intervals: np.ndarray, a: float, b: float) -> np.ndarray:
    if intervals.shape[1] == 0:
        return intervals
    lo = np.searchsorted(intervals[1], a, side="right")
    hi = np.searchsorted(intervals[0], b, side="left")
    part = intervals[:, lo:hi].copy()
    if part.shape[1]:
        part[0, 0] = max(part[0, 0], a)
        part[1, -1] = min(part[1, -1], b)
    return part


#: A rank's intervals, by what runs in them.
_INTERVALS = ("compute", "comm", "other", "data")


def _segments(intervals: Mapping[str, np.ndarray], a: float, b: float
              ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``[a, b)`` cut where any interval starts or ends: the cut points, the segments' lengths
    and each part's segments (one label each, first match wins)."""
    sets = {k: _clip(intervals[k], a, b) for k in _INTERVALS}
    points = np.unique(np.concatenate([[a, b], *(s.ravel() for s in sets.values())]))
    lengths = np.diff(points)
    mids = (points[:-1] + points[1:]) / 2
    p, m, o, d = (_inside(sets[k], mids) for k in _INTERVALS)
    labels = {"comm_hidden": m & p, "compute": p & ~m, "comm_exposed": m & ~p,
              "other": o & ~m & ~p}
    labels["data"] = d & ~m & ~p & ~o
    labels["host"] = ~(m | p | o | d)
    return points, lengths, labels


def _runs(points: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """The runs of consecutive ``segments`` (between ``points``) as merged intervals."""
    edges = np.flatnonzero(np.diff(np.r_[0, segments.astype(np.int8), 0])).reshape(-1, 2)
    return np.vstack((points[edges[:, 0]], points[edges[:, 1]]))


def _longest(points: np.ndarray, host: np.ndarray, starts: np.ndarray, names: list[str]
             ) -> tuple[float, str | None]:
    """The longest run of consecutive host segments, and the first event starting at its end."""
    runs = _runs(points, host)
    if not runs.shape[1]:
        return 0.0, None
    lengths = runs[1] - runs[0]
    best = int(np.argmax(lengths))
    end = runs[1, best]
    i = int(np.searchsorted(starts, end - 1.0))  # an event starting within 1 µs
    name = names[i] if i < len(names) and starts[i] <= end + 1000 else None
    return float(lengths[best]) / 1e3, name


def _overlap(x: np.ndarray, y: np.ndarray) -> float:
    """The length of the intersection of two sets of merged intervals."""
    if not (x.shape[1] and y.shape[1]):
        return 0.0
    points = np.unique(np.concatenate((x.ravel(), y.ravel())))
    mids = (points[:-1] + points[1:]) / 2
    return float(np.diff(points)[_inside(x, mids) & _inside(y, mids)].sum())


def _waits(traces: Mapping[int, _Trace], step: int
           ) -> tuple[dict[int, np.ndarray], dict[int, dict[str, float]]]:
    """Per rank, the intervals of step ``step`` spent waiting in collectives for a later rank,
    and the µs waited per collective name. The k-th collective of a name in the step is the
    same collective on every rank."""
    keyed: dict[int, dict[tuple[str, int], tuple[float, float]]] = {}
    for rank, trace in traces.items():
        a, b = trace.steps[step]
        counts: dict[str, int] = defaultdict(int)
        mine = {}
        ordered = trace.collectives  # by start: the step's are one slice, found in log time
        for name, ts, dur in ordered[bisect.bisect_left(ordered, a, key=_START):
                                     bisect.bisect_left(ordered, b, key=_START)]:
            mine[(name, counts[name])] = (ts, dur)
            counts[name] += 1
        keyed[rank] = mine
    common = set.intersection(*(set(k) for k in keyed.values())) if keyed else set()
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    by_name: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key in common:
        shortest = min(keyed[r][key][1] for r in keyed)
        for rank, mine in keyed.items():
            ts, dur = mine[key]
            if dur > shortest:
                spans[rank].append((ts, ts + dur - shortest))
                by_name[rank][key[0]] += dur - shortest
    return ({r: _pairs(spans.get(r, [])) for r in traces},
            {r: dict(v) for r, v in by_name.items()})


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _round(value: float) -> float:
    return round(value, 3)


def analyse(traces: Mapping[int, _Trace], min_excess_ms: float = MIN_EXCESS_MS,
            min_excess_pct: float = MIN_EXCESS_PCT, last_step: bool = False,
            left_out: list[int] | None = None) -> dict[str, Any]:
    """The diagnosis of ranks' traces: per rank and step, stragglers, findings. The steps are
    those every rank profiled, less the last one unless ``last_step`` (as HTA drops it: the
    trace is exported as it ends, and a collective of it may run into the export).
    ``left_out``: the job's ranks that have no trace here."""
    steps = sorted(set.intersection(*(set(t.steps) for t in traces.values())))
    if len(steps) > 1 and not last_step:
        steps = steps[:-1]
    ranks: dict[int, dict[str, Any]] = {}
    means: dict[int, dict[str, float]] = {}
    waited_in: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hosts: dict[int, list[tuple[float, str | None]]] = defaultdict(list)
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for step in steps:
        waits, names = _waits(traces, step)
        for rank, trace in traces.items():
            a, b = trace.steps[step]
            done = trace.breakdown[step]
            row = {"step": step, "step_ms": (b - a) / 1e3,
                   **{f"{k}_ms": v for k, v in done.parts.items()},
                   "comm_wait_ms": _overlap(waits[rank], done.exposed) / 1e3}
            rows[rank].append(row)
            hosts[rank].append(done.longest_host)
            for name, us in names.get(rank, {}).items():
                waited_in[rank][name] += us / 1e3
    for rank, trace in sorted(traces.items()):
        keys = ["step_ms", *(f"{k}_ms" for k in PARTS), "comm_wait_ms"]
        means[rank] = {k: _mean([r[k] for r in rows[rank]]) for k in keys}
        ranks[rank] = {
            "sources": trace.sources, "device": "gpu" if trace.device else "cpu",
            "steps": [{k: (_round(v) if isinstance(v, float) else v) for k, v in r.items()}
                      for r in rows[rank]],
            "mean": {k: _round(v) for k, v in means[rank].items()},
        }
    stragglers = _stragglers(means, rows, hosts, waited_in, min_excess_ms, min_excess_pct)
    return {"steps": steps, "ranks": {str(r): v for r, v in ranks.items()},
            "stragglers": stragglers, "findings": _findings(means, stragglers, left_out or [])}


def _busy(step: Mapping[str, float]) -> float:
    """A rank's own time in a step: the step less its waiting for other ranks."""
    return step["step_ms"] - step["comm_wait_ms"]


def _own(step: Mapping[str, float], part: str) -> float:
    """A part of a rank's own time: exposed communication without its waiting."""
    value = step[f"{part}_ms"]
    return value - step["comm_wait_ms"] if part == "comm_exposed" else value


def _above(rows: Mapping[int, list[dict[str, Any]]], rank: int,
           value: Callable[[Mapping[str, float]], float]) -> list[float]:
    """Per step, how far ``value`` of ``rank``'s step is above the median of the other
    ranks' in the same step."""
    others = [r for r in rows if r != rank]
    return [value(mine) - statistics.median(value(rows[r][i]) for r in others)
            for i, mine in enumerate(rows[rank])]


def _stragglers(means: Mapping[int, Mapping[str, float]],
                rows: Mapping[int, list[dict[str, Any]]],
                hosts: Mapping[int, list[tuple[float, str | None]]],
                waited_in: Mapping[int, Mapping[str, float]],
                min_excess_ms: float, min_excess_pct: float) -> list[dict[str, Any]]:
    """Ranks whose own time per step (the step less its waiting) exceeds the other ranks'
    by the thresholds, as the median over steps and in most steps (a rank slower now and
    then is jitter, not a straggler); the part holding the excess; the ranks that wait."""
    nsteps = min((len(v) for v in rows.values()), default=0)
    if len(means) < 2 or not nsteps:
        return []
    step = statistics.median(m["step_ms"] for m in means.values())
    floor = max(min_excess_ms, min_excess_pct / 100 * step)
    out = []
    for rank in means:
        per_step = _above(rows, rank, _busy)
        excess, over = statistics.median(per_step), sum(v >= floor for v in per_step)
        if excess < floor or over < math.ceil(MOST_STEPS * nsteps):
            continue
        by_part = {p: statistics.median(_above(rows, rank, lambda row, p=p: _own(row, p)))
                   for p in PARTS}
        part = max(by_part, key=by_part.__getitem__)
        waiting = {r: m["comm_wait_ms"] for r, m in means.items()
                   if r != rank and m["comm_wait_ms"] >= 0.5 * excess}
        entry: dict[str, Any] = {
            "rank": rank, "excess_ms_per_step": _round(excess), "category": part,
            "slower_in_steps": f"{over}/{nsteps}",
            "by_category_ms": {p: _round(v) for p, v in by_part.items()},
            "waiting_ranks": sorted(waiting),
            "wait_ms_per_step": {str(r): _round(v) for r, v in sorted(waiting.items())},
            "waited_in": sorted({n for r in waiting for n, ms in waited_in.get(r, {}).items()
                                 if ms / nsteps >= 0.1 * excess}),
        }
        if part == "host":
            gaps = [name for ms, name in hosts[rank] if ms >= 0.5 * by_part["host"]]
            entry["host_gap_before"] = (statistics.mode(gaps) if gaps and None not in gaps
                                        else None)
        out.append(entry)
    return sorted(out, key=lambda s: -s["excess_ms_per_step"])


def _ranks_text(ranks: list[int]) -> str:
    """``rank 1``, ``ranks 0 and 2``, ``ranks 0, 2-127``: runs of 3 or more as a range."""
    words, start = [], 0
    for i, rank in enumerate(ranks):
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            run = ranks[start:i + 1]
            words += [f"{run[0]}-{run[-1]}"] if len(run) > 2 else [str(r) for r in run]
            start = i + 1
    joined = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    return ("rank " if len(ranks) == 1 else "ranks ") + joined


def _findings(means: Mapping[int, Mapping[str, float]], stragglers: list[dict[str, Any]],
              left_out: list[int]) -> list[dict[str, Any]]:
    """Plain-language findings, the ms per step at stake first. Where ranks of the job are
    ``left_out``, the ranks read may be waiting for them in what looks like exposed
    communication: the finding says so."""
    out = []
    for s in stragglers:
        where = WORDS[s["category"]]
        if s.get("host_gap_before"):
            where += f", mostly just before {s['host_gap_before']}"
        text = f"rank {s['rank']} is {s['excess_ms_per_step']:.1f} ms/step slower, in {where}"
        if s["waiting_ranks"]:
            verb = "waits" if len(s["waiting_ranks"]) == 1 else "wait"
            text += f"; {_ranks_text(s['waiting_ranks'])} {verb} for it"
            if s["waited_in"]:
                text += " in " + ", ".join(s["waited_in"])
        out.append({"ms_per_step": s["excess_ms_per_step"], "rank": s["rank"],
                    "category": s["category"], "text": text})
    if means:
        step = _mean([m["step_ms"] for m in means.values()])
        where = f"on {_ranks_text(sorted(means))}" if len(means) == 1 or left_out else \
            "on every rank"
        if left_out:
            where += f" ({_ranks_text(left_out)} left out)"
        for part in ("host", "comm_exposed", "data", "other"):
            values = [_own(m, part) for m in means.values()]
            if step > 0 and min(values) >= FINDING_SHARE * step:
                ms = _mean(values)
                what = (f"exposed communication, perhaps waiting for {_ranks_text(left_out)},"
                        if part == "comm_exposed" and left_out else WORDS[part])
                out.append({"ms_per_step": _round(ms), "rank": None, "category": part,
                            "text": f"{what} takes {ms:.1f} ms/step on average, "
                                    f"{100 * ms / step:.0f} % of the step, {where}"})
    return sorted(out, key=lambda f: -f["ms_per_step"])


# --- trials ----------------------------------------------------------------------------------

def _telemetry(inputs: Mapping[int, RankInputs], warn: Warn) -> dict[int, list[RankRecord]]:
    """The benchmark's telemetry per rank, where it wrote it (read as the timeline reads it)."""
    return {rank: read_telemetry(found.jsonl, warn) for rank, found in sorted(inputs.items())
            if found.jsonl is not None}


def _injected(telemetry: Mapping[int, list[RankRecord]], steps: list[int]
              ) -> dict[str, dict[str, float]]:
    """The benchmark's ``injected_ms`` per rank, where its JSONL has them: the mean over the
    diagnosed steps (its ``global_step`` is the profiler's step number), else over all."""
    out, diagnosed_steps = {}, set(steps)
    for rank, rows in telemetry.items():
        totals: dict[str, list[float]] = defaultdict(list)
        diagnosed: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if row.injected_ms is UNSET:
                continue
            for k, v in row.injected_ms.items():
                totals[k].append(v)
                if row.global_step in diagnosed_steps:
                    diagnosed[k].append(v)
        totals = diagnosed or totals
        if totals:
            out[str(rank)] = {k: _round(_mean(v)) for k, v in totals.items()}
    return out


def _correct_clocks(traces: Mapping[int, _Trace], telemetry: Mapping[int, list[RankRecord]],
                    warn: Warn) -> dict[str, dict[str, Any]]:
    """Each rank's Kineto clock held against the benchmark's wall clock by the rate of its
    ``aorta.iteration#N`` starts (:func:`~aorta_core.reports.clock_check.clock_rate`, as the
    timeline's clock check; ``ProfilerStep#N`` cannot serve, a profiler stepped on the optimizer
    puts it inside iterations). A rank whose trace ran at another rate is measured back, said in
    one line and in ``clock_corrections``."""
    out: dict[str, dict[str, Any]] = {}
    for rank, trace in traces.items():
        wall = {row.global_step: row.time_start_unix_ns for row in telemetry.get(rank, ())}
        rate = clock_rate({n: t * 1e3 for n, t in trace.iterations.items()}, wall)
        if rate is None or not rate.off:
            continue
        trace.rescale(rate.rate)
        out[str(rank)] = {"rate": round(rate.rate, 4), "steps": [rate.first, rate.last]}
        warn(f"rank {rank}: its Kineto trace's {rate.describe()}")
    return out


def _never_ran(record: Mapping[str, Any]) -> bool:
    """A trial whose payload was never started (a collector or the launch refused it)."""
    return (record.get("verdict") == "error" and record.get("exit_code") is None
            and record.get("wall_time_s") is None and not record.get("timed_out"))


def _failed(trial: Path, record: Mapping[str, Any] | None) -> str | None:
    """``<trial>: the trial failed (<its error>); ...`` for a trial that ran and failed, with
    the log to read; ``None`` for one that passed (or has no record)."""
    if record is None or record.get("verdict") not in ("fail", "error"):
        return None
    why = " ".join(str(record.get("error") or f"exit code {record.get('exit_code')}").split())
    log = trial / str(record.get("stderr") or "stderr.log")
    return f"{trial}: the trial failed ({why}); {log} has the whole error"


def _nothing_to_diagnose(trial: Path, record: Mapping[str, Any] | None,
                         inputs: Mapping[int, RankInputs], read: Mapping[int, _Trace]) -> str:
    """Why a trial gives no diagnosis, in one line with the fix: no trace (deleted by its
    retention, or never profiled), none readable, or none with ``ProfilerStep#N``."""
    files = [t.source.path for found in inputs.values() for t in found.traces]
    unread = sum(t.unread for t in read.values()) + sum(
        len(inputs[rank].traces) for rank in set(inputs) - set(read))
    kept = (f"; the {DIAGNOSIS_NAME} already there is kept"
            if (trial / DIAGNOSIS_NAME).is_file() else "")
    deleted = ((record or {}).get("retention") or {}).get("deleted") or []
    if not files and deleted:
        level = record["retention"].get("level")
        return (f"{trial}: its traces were deleted after the run by its retention (level "
                f"{level}, {len(deleted)} path(s)){kept}; keep them with "
                f"retain.on_{record.get('verdict', 'pass')}=full, or diagnose during the "
                "sweep with diagnose=true")
    if not files and _failed(trial, record):
        return (f"{trial}: the failed trial left no Kineto trace with ProfilerStep#N ranges to "
                f"diagnose{kept}; fix its failure, then run it again")
    if not files:
        return (f"{trial}: no Kineto trace with ProfilerStep#N ranges to diagnose{kept}; "
                "profile the run: collector=torchprof in a sweep, or profiling.enabled=true "
                "when you run python -m aorta_core.benchmark yourself")
    if unread == len(files):
        return (f"{trial}: none of its {len(files)} Kineto trace(s) could be read (the lines "
                f"above say why){kept}; profile the run again")
    return (f"{trial}: its {len(files)} Kineto trace(s) ({_relative(files[0], trial)}"
            f"{', ...' if len(files) > 1 else ''}) hold no ProfilerStep#N ranges to diagnose"
            f"{kept}; profile with a schedule (torch.profiler.profile(schedule=torch.profiler."
            "schedule(...))) and call prof.step() once per training step, as "
            "collector=torchprof does")


def diagnose_trial(trial: Path, record: Mapping[str, Any] | None = None,
                   hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                   min_excess_ms: float = MIN_EXCESS_MS, min_excess_pct: float = MIN_EXCESS_PCT,
                   warn: Warn = warning_line, failure_shown: bool = False
                   ) -> dict[str, Any] | None:
    """The diagnosis of one trial folder, or ``None`` (after a warning) when no rank has a
    Kineto trace with ``ProfilerStep#N`` ranges. A trial that failed is said to have failed
    first, and why, unless ``failure_shown`` (the sweep's trial line said it)."""
    trial = Path(trial).absolute()  # the collectors' sources are read relative to it
    if record is None:
        try:
            record = msgspec.to_builtins(load_record(trial / RECORD_NAME))
        except (FileNotFoundError, BadRecord):
            record = None
    notes: list[str] = []

    def note(line: str) -> None:
        notes.append(line)
        warn(line)

    if record is not None and _never_ran(record):
        warn(f"{trial}: the trial did not run ({record.get('error') or 'no exit code'}); "
             "nothing to diagnose")
        return None
    failed = _failed(trial, record)
    if failed:  # first: what its traces show comes after why it failed
        notes.append(failed)
        if not failure_shown:
            warn(failed)
    inputs = discover(trial, record, note, hook_timeout_s)
    read = read_ranks({rank: [t.source.path for t in found.traces]
                       for rank, found in inputs.items()}, trial, note)
    traces = {rank: trace for rank, trace in read.items() if trace.steps}
    if not traces:
        warn(_nothing_to_diagnose(trial, record, inputs, read))
        return None
    world = max((t.world_size or 0 for t in read.values()), default=0)
    left_out = sorted((set(inputs) | set(range(world))) - set(traces))
    if left_out:
        note(f"{_ranks_text(left_out)} of the job: no readable trace with profiled steps here; "
             f"the diagnosis covers {_ranks_text(sorted(traces))} only, and counts the "
             f"waiting for {_ranks_text(left_out)} as exposed communication")
    telemetry = _telemetry(inputs, note)
    corrections = _correct_clocks(traces, telemetry, note)
    result = analyse(traces, min_excess_ms, min_excess_pct, left_out=left_out)
    if not result["steps"]:
        note("the ranks' traces share no ProfilerStep number; nothing to compare")
    return {"schema_version": SCHEMA_VERSION, "trial": str(trial.resolve()),
            "definitions": "docs/diagnose.md",
            "thresholds": {"min_excess_ms": min_excess_ms, "min_excess_pct": min_excess_pct},
            **result, "left_out_ranks": left_out,
            "injected": _injected(telemetry, result["steps"]),
            "clock_corrections": corrections, "warnings": notes}


def write_diagnosis(trial: Path, record: Mapping[str, Any] | None = None,
                    hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                    failure_shown: bool = False, **thresholds: float
                    ) -> tuple[Path, dict[str, Any]] | None:
    """``<trial>/diagnosis.json`` and what it holds; ``None`` when there was nothing to read."""
    result = diagnose_trial(trial, record, hook_timeout_s, failure_shown=failure_shown,
                            **thresholds)
    if result is None:
        return None
    path = Path(trial) / DIAGNOSIS_NAME
    write_atomic(path, dump_json(result))
    return path, result


def diagnose_step(cell: Cell) -> Callable[[Path, Mapping[str, Any]], None] | None:
    """The trial step that writes ``diagnosis.json`` when ``cell`` asks for it
    (``diagnose=true``), for :func:`aorta_core.engine.trial.run_trial`'s ``after_run``."""
    if not cell.diagnose:
        return None

    def step(trial_dir: Path, record: Mapping[str, Any]) -> None:
        try:  # the trial's results matter more than its diagnosis
            write_diagnosis(trial_dir, record, cell.hook_timeout_s, failure_shown=True)
        except Exception as exc:
            warning_line(f"no diagnosis for {trial_dir} ({exception_line(exc)})")
    return step
