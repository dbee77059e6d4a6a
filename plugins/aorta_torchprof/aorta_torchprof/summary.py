"""One Kineto trace file -> a small :class:`FileSummary` (the per-rank work of a parse).

Runs in a worker process of :func:`aorta_core.api.parallel_map` (or in-process for a single file),
so the decoded events never leave it: what goes back is per-file sums, kernel time per name and
the file's communication/computation overlap, from which the parent derives every cross-rank
metric. The merged intervals go back only for a file whose rank has other files (profiler
cycles), as that rank's overlap is taken over the union of its files: 64 ranks' intervals were
most of the parent's memory. The GPU lane is summed in one pass over its events in plain Python
(no numpy: its import cost more than a small trace's whole parse, and on a 59k-kernel lane the
pass takes as long as the columns did), a small fraction of the decode itself.
"""

from __future__ import annotations

import bisect
import errno
import math
import mmap
import zlib
from collections import defaultdict
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_core.api import FileRefused, mapped_limited, merged, without_bom
from aorta_torchprof.hta_overlap import (
    COMMUNICATION,
    COMPUTATION,
    Overlap,
    kernel_class,
)
from aorta_torchprof.trace import (
    GPU_CATS,
    LAUNCH_CATS,
    NO_CORRELATION,
    STEP_PREFIX,
    decode,
    decode_lane,
    on_gpu_lane,
    plausible,
)

#: GPU-lane categories by what they add to: kernel, memcpy, memset, or nothing (cuda_sync).
_KIND = {cat: ("kernel", "gpu_memcpy", "gpu_memset").index(cat.lower())
         if cat.lower() != "cuda_sync" else 3 for cat in GPU_CATS}


@dataclass
class GpuLane:
    """One file's GPU lane, summed; intervals are merged ``(start, end)`` pairs in µs after
    ``base_us``."""

    kernel_count: int
    kernel_us: float
    memcpy_us: float
    memset_us: float
    kernel_us_by_name: dict[str, float]
    base_us: float
    overlap: Overlap
    #: Empty unless the parent asked for them (the rank has other files).
    comm: list[tuple[float, float]]
    compute: list[tuple[float, float]]


@dataclass
class FileSummary:
    """What the parent needs of one trace: its rank and either its GPU lane or CPU op self
    times (trace without GPU-lane events); ``skipped`` says why a file gave nothing."""

    path: Path
    rank: int = 0
    gpu: GpuLane | None = None
    cpu_ops: dict[str, tuple[float, int]] | None = None
    #: ``(name, step, calls, total_us)``: GPU kernels (or, without a GPU lane, CPU ops' self
    #: time) per ``ProfilerStep#N`` (``None``: outside every step), for ``kernel_table``.
    rows: list[tuple[str, int | None, int, float]] | None = None
    #: Its time per profiled step (µs), in the window the rows come from: on the GPU, from the
    #: first kernel a step launched to the end of the last step's last kernel, over the steps;
    #: on the CPU, the ``ProfilerStep#N`` ranges' mean. ``None`` without steps.
    step_us: float | None = None
    skipped: str | None = None


def summarise(path: Path, root: Path, drop_last: bool,
              intervals_for: Container[Path] | None = None) -> FileSummary:
    """Decode ``path`` only as far as the metrics need: lanes and correlations are decoded
    too for CPU ops (no GPU lane) and for HTA's step filter (``drop_last``). The file is
    mapped, not copied: the trial that wrote it has ended. ``intervals_for``: the files whose
    merged intervals go back (``None``: every file's)."""
    keep = intervals_for is None or path in intervals_for
    try:
        with mapped_limited(path, root) as data, without_bom(data) as text:
            return _summarise(path, text, drop_last, keep)
    except FileRefused as exc:
        return FileSummary(path, skipped=f"{exc}; its metrics are omitted")
    except (OSError, EOFError, zlib.error) as exc:  # zlib: a corrupt .gz body
        if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
            # the map itself refused (address-space limit): memory, said as a MemoryError is
            raise MemoryError(exc.strerror) from exc
        return FileSummary(path, skipped=f"skipping {path}: {exc}")


def _summarise(path: Path, data: bytes | mmap.mmap, drop_last: bool, keep: bool
               ) -> FileSummary:
    try:
        trace = decode_lane(path, data)
        lane = _Lane.of(on_gpu_lane(trace.events))
        rows, step_us = _kernels_by_step(trace.events, lane.events) if lane else (None, None)
        if lane is None or drop_last:
            trace.events = []  # free the first decode before the second
            trace = decode(path, data, full=True)
            events = on_gpu_lane(trace.events)
            lane = _Lane.of(_hta_step_filter(trace.events, events) if drop_last else events)
    except ValueError as exc:
        return FileSummary(path, skipped=f"skipping {path}: {exc}")
    if lane is not None:
        return FileSummary(path, trace.rank, gpu=lane.summary(keep), rows=rows, step_us=step_us)
    steps = _Steps.of(trace.events)
    by_step = _cpu_self_times(trace.events, steps)
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for (name, _), (self_us, calls) in by_step.items():
        ops[name][0] += self_us
        ops[name][1] += calls
    return FileSummary(path, trace.rank, cpu_ops={n: (v[0], int(v[1])) for n, v in ops.items()},
                       rows=[(n, step, c, us) for (n, step), (us, c) in by_step.items()],
                       step_us=steps.mean_us())


@dataclass
class _Steps:
    """The ``ProfilerStep#N`` ranges of a trace's CPU side, by start."""

    starts: list[float]
    ends: list[float]
    numbers: list[int]

    @classmethod
    def of(cls, events: list[Any]) -> _Steps:
        ranges = sorted((e.ts, e.ts + e.dur, int(e.name[len(STEP_PREFIX):]))
                        for e in events if e.name.startswith(STEP_PREFIX)
                        and e.cat == "user_annotation"  # not their GPU-lane projection
                        and e.name[len(STEP_PREFIX):].isdigit()
                        and plausible(e))
        return cls([r[0] for r in ranges], [r[1] for r in ranges], [r[2] for r in ranges])

    def mean_us(self) -> float | None:
        """The ranges' mean length; ``None`` without one."""
        lengths = [b - a for a, b in zip(self.starts, self.ends, strict=True)]
        return math.fsum(lengths) / len(lengths) if lengths else None

    def at(self, ts: float) -> int | None:
        """The step whose range holds ``ts``; ``None`` outside every step."""
        i = bisect.bisect_right(self.starts, ts) - 1
        return self.numbers[i] if i >= 0 and ts < self.ends[i] else None


def _kernels_by_step(events: list[Any], lane: list[Any]
                     ) -> tuple[list[tuple[str, int | None, int, float]], float | None]:
    """Calls and time of each kernel per step: the step of the CPU range that launched it (its
    runtime launch of the same correlation); ``None`` without a launch inside a step. And the
    GPU's time per step over the kernels of the steps (:attr:`FileSummary.step_us`)."""
    steps = _Steps.of(events)
    launched = {_corr(e): e.ts for e in events if e.cat in LAUNCH_CATS} if steps.numbers else {}
    totals: dict[tuple[str, int | None], list[float]] = defaultdict(lambda: [0, 0.0])
    first, last, stepped = math.inf, -math.inf, set()
    for e in lane:
        if _KIND[e.cat] == 0:
            ts = launched.get(_corr(e))
            step = None if ts is None else steps.at(ts)
            total = totals[(e.name, step)]
            total[0] += 1
            total[1] += e.dur
            if step is not None:
                first, last = min(first, e.ts), max(last, e.ts + e.dur)
                stepped.add(step)
    return ([(name, step, int(v[0]), v[1]) for (name, step), v in totals.items()],
            (last - first) / len(stepped) if stepped else None)


@dataclass
class _Lane:
    """The complete GPU-lane events with a real clock's span (:func:`plausible`)."""

    events: list[Any]

    @classmethod
    def of(cls, events: list[Any]) -> _Lane | None:
        """``None`` when no event is left."""
        kept = [e for e in events if plausible(e)]
        return cls(kept) if kept else None

    def summary(self, keep_intervals: bool) -> GpuLane:
        base = min(e.ts for e in self.events)
        durations: tuple[list[float], ...] = ([], [], [], [])
        by_name: dict[str, float] = defaultdict(float)
        classes: dict[str, str] = {}
        spans: dict[str, list[tuple[float, float]]] = {COMMUNICATION: [], COMPUTATION: []}
        for e in self.events:
            kind = _KIND[e.cat]
            durations[kind].append(e.dur)
            if kind == 0:
                by_name[e.name] += e.dur
            kind_class = classes.get(e.name)
            if kind_class is None:
                kind_class = classes[e.name] = kernel_class(e.name)
            if kind_class in spans:
                start = e.ts - base
                spans[kind_class].append((start, start + e.dur))
        comm, compute = merged(spans[COMMUNICATION]), merged(spans[COMPUTATION])
        return GpuLane(
            kernel_count=len(durations[0]),
            kernel_us=math.fsum(durations[0]),
            memcpy_us=math.fsum(durations[1]),
            memset_us=math.fsum(durations[2]),
            kernel_us_by_name=dict(by_name),
            base_us=base,
            overlap=Overlap.of(comm, compute),
            comm=comm if keep_intervals else [],
            compute=compute if keep_intervals else [],
        )


def _hta_step_filter(events: list[Any], lane: list[Any]) -> list[Any]:
    """HTA's default filter: drop GPU work not launched before the last ``ProfilerStep``."""
    steps = [e for e in events if "ProfilerStep" in e.name and e.cat not in GPU_CATS]
    if len({e.name for e in steps}) < 2:
        return lane  # HTA filters only when the trace holds two or more steps
    cutoff = max(e.ts for e in steps)
    kept = {_corr(e) for e in events if e.cat not in GPU_CATS and e.ts < cutoff}
    return [e for e in lane if _corr(e) in kept]


def _corr(event: Any) -> int:
    args = event.args
    corr = args.correlation if args is not None else None
    return NO_CORRELATION if corr is None else corr


def _cpu_self_times(events: list[Any], steps: _Steps
                    ) -> dict[tuple[str, int | None], tuple[float, int]]:
    """Self time (µs) and calls per ``cpu_op`` name and step (the step holding the op's start):
    duration minus nested ops on its thread."""
    lanes: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if e.cat == "cpu_op" and plausible(e):
            lanes[(e.pid, e.tid)].append((e.ts, -e.dur, e.name))
    totals: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0])
    for ops in lanes.values():
        ops.sort()
        stack: list[list[Any]] = []  # [end, name, self_us]
        for ts, neg_dur, name in ops:
            while stack and ts >= stack[-1][0]:
                _emit(totals, stack.pop())
            if stack:
                stack[-1][2] -= min(-neg_dur, stack[-1][0] - ts)
            stack.append([ts - neg_dur, (name, steps.at(ts)), -neg_dur])
        while stack:
            _emit(totals, stack.pop())
    return {key: (v[0], int(v[1])) for key, v in totals.items()}


def _emit(totals: dict[Any, list[float]], frame: list[Any]) -> None:
    _, name, self_us = frame
    totals[name][0] += max(self_us, 0.0)
    totals[name][1] += 1
