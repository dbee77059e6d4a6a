"""A Kineto trace's events as numpy columns, and what each event is to the analyses of ranks.

A worker decodes only the seven fields read here, a big trace one piece at a time, and turns
each piece's complete events of the categories read into columns while they are still in the
cache (:class:`Reader`). What a name is (a step, a collective, compute, data loading, ...) is
decided once per distinct name, category and thread, never per event: names repeat thousands of
times, and a trace may hold names of megabytes, so every test of a name is linear in its length.
:func:`read_one` turns one file's columns into the spans :mod:`~aorta_core.reports.rank_traces`
merges over a rank's files. The classes follow HolisticTraceAnalysis's (docs/diagnose.md).
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from aorta_core.api.intervals import inside, merge
from aorta_core.benchmark.markers import ITERATION_MARKER
from aorta_core.reports.trace_events import TIME_LIMIT_US

# Names. CPU side: a collective's execution (gloo's worker thread, NCCL's annotation), the
# c10d op that issues it, torch's record_param_comms; the benchmark's data range and
# torch.utils.data's iterator (:func:`_is_data`).
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


class Span(msgspec.Struct, gc=False):
    """What the analyses read of a trace event; a missing time is NaN, which every test of a
    span fails, and a missing name or category is empty."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = math.nan
    dur: float = math.nan
    pid: int | str = ""
    tid: int | str = ""


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[Span]
    #: Kineto's: ``ts`` µs + this is Unix time (the timeline reads it so too). Any value: one
    #: that is no integer costs the ranks' clocks their base, never the diagnosis its file.
    baseTimeNanoseconds: Any = None
    #: Kineto's name of the host that wrote the trace: ranks of one host share its clock.
    host_name: Any = None


#: A whole trace, and a piece of its events (:func:`~aorta_core.api.decode_pieces`).
DECODER = msgspec.json.Decoder(_Doc)
SPANS = msgspec.json.Decoder(list[Span])


_TS, _DUR = attrgetter("ts"), attrgetter("dur")
_KEY = attrgetter("name", "cat", "pid", "tid")
#: One piece's events as columns: start, end, and the code of (name, category, pid, tid); and
#: how many of them lie off every clock.
_Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, int]


class _Codes(dict[Any, int]):
    """Gives each key the next code the first time it is seen."""

    def __missing__(self, key: Any) -> int:
        self[key] = code = len(self)
        return code


class Reader:
    """The events of a trace that the analyses read (complete, of their categories), made
    into columns one piece of the trace at a time (:func:`read_trace`'s ``pieces``): a piece's
    events are read while they are in the cache and freed before the next is decoded, so a
    file's events are never all held as objects (the same work on all of a 145 MB trace's
    events at once took 0.74 s, 0.46 s in 2 MiB pieces). An event's name,
    category and thread are one code per distinct (name, category, pid, tid): what a name is,
    is decided once per code, not per event."""

    def __init__(self) -> None:
        self._keys = _Codes()

    def piece(self, events: list[Span]) -> list[_Chunk]:
        """A time or duration beyond :data:`TIME_LIMIT_US` (``1e308``) makes the event's start
        NaN, which fails every test of a span, as a missing time does; it is counted."""
        xs = [e for e in events if e.ph == "X" and e.cat in _READ_CATS]
        n = len(xs)
        ts, dur = (np.fromiter(map(get, xs), float, n) for get in (_TS, _DUR))
        far = (np.abs(ts) > TIME_LIMIT_US) | (np.abs(dur) > TIME_LIMIT_US)  # NaN is not far
        ts[far] = np.nan
        return [(ts, ts + dur, np.fromiter(map(self._keys.__getitem__, map(_KEY, xs)), np.intp,
                                           n), int(far.sum()))]

    def columns(self, chunks: list[_Chunk]) -> Columns:
        return Columns(chunks, list(self._keys))


@dataclass
class OneFile:
    """One file's spans as ``[2, k]`` arrays (start, end; not merged)."""

    device: bool
    steps: dict[int, tuple[float, float]]
    #: The benchmark's ``aorta.iteration#N`` ranges: (start, end).
    iterations: dict[int, tuple[float, float]]
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


class Columns:
    """A file's events that the analyses read, as columns (:class:`Reader`'s chunks and the
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


def file_steps(col: Columns) -> dict[int, tuple[float, float]]:
    """A file's ``ProfilerStep#N`` ranges by N."""
    step = col.of(_STEP_RANGE)
    return {int(name.rpartition("#")[2]): (a, b) for name, a, b in zip(
        col.names(step), col.ts[step].tolist(), col.end[step].tolist(), strict=True)}


def read_one(col: Columns, steps: dict[int, tuple[float, float]]) -> OneFile:
    """One file's spans of each kind: on a GPU trace its kernels, on a CPU trace its ops and
    collective ranges."""
    step = col.of(_STEP_RANGE)
    on_steps = col.ok & col.cpu & ~step & np.isin(col.thread, col.thread[step])
    marked = col.of(_ITERATION_RANGE)
    iterations = {}
    for name, start, end in zip(col.names(marked), col.ts[marked].tolist(),
                                col.end[marked].tolist(), strict=True):
        with contextlib.suppress(ValueError):  # a name of ours with no number after it
            iterations[int(name[len(ITERATION_MARKER):])] = start, end
    data = col.spans(col.of(_DATA_RANGE))
    starts, names = col.ts[on_steps], col.names(on_steps)
    kernels = col.of(_KERNEL_COMPUTE, _KERNEL_COMM, _KERNEL_OTHER)
    if kernels.any():
        return OneFile(True, steps, iterations, col.spans(col.of(_KERNEL_COMPUTE)),
                       col.spans(col.of(_KERNEL_COMM)), col.spans(col.of(_KERNEL_OTHER)), data,
                       col.timed(col.of(_KERNEL_COMM)), starts, names)
    # an op inside a collective (gloo's copies) or the data step of its thread is not compute
    comm = col.of(_COMM_RANGE, _COLLECTIVE_RANGE)
    op = col.of(_OP)
    mids = (col.ts + col.end) / 2
    away = inside(merge(*data), mids)
    away[op] |= _inside_own_thread(col, comm, op, mids)
    # without execution ranges (older torch) a collective is its c10d op
    collectives = col.timed(col.of(_COLLECTIVE_RANGE)) or col.timed(
        col.of(_COMM_RANGE) & col.c10d)
    return OneFile(False, steps, iterations, col.spans(op & ~away), col.spans(comm),
                   np.empty((2, 0)), data, collectives, starts, names)


def _inside_own_thread(col: Columns, spans: np.ndarray, points: np.ndarray, x: np.ndarray
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
