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
    NO_CORRELATION,
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
        lane = _Lane.of(trace.events)
        if lane is None or drop_last:
            trace.events = []  # free the first decode before the second
            trace = decode(path, data, full=True)
            events = on_gpu_lane(trace.events)
            lane = _Lane.of(_hta_step_filter(trace.events, events) if drop_last else events)
    except ValueError as exc:
        return FileSummary(path, skipped=f"skipping {path}: {exc}")
    if lane is not None:
        return FileSummary(path, trace.rank, gpu=lane.summary(keep))
    return FileSummary(path, trace.rank, cpu_ops=_cpu_self_times(trace.events))


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


def _cpu_self_times(events: list[Any]) -> dict[str, tuple[float, int]]:
    """Self time (µs) and calls per ``cpu_op`` name: duration minus nested ops on its thread."""
    lanes: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if e.cat == "cpu_op" and plausible(e):
            lanes[(e.pid, e.tid)].append((e.ts, -e.dur, e.name))
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for ops in lanes.values():
        ops.sort()
        stack: list[list[Any]] = []  # [end, name, self_us]
        for ts, neg_dur, name in ops:
            while stack and ts >= stack[-1][0]:
                _emit(totals, stack.pop())
            if stack:
                stack[-1][2] -= min(-neg_dur, stack[-1][0] - ts)
            stack.append([ts - neg_dur, name, -neg_dur])
        while stack:
            _emit(totals, stack.pop())
    return {name: (v[0], int(v[1])) for name, v in totals.items()}


def _emit(totals: dict[str, list[float]], frame: list[Any]) -> None:
    _, name, self_us = frame
    totals[name][0] += max(self_us, 0.0)
    totals[name][1] += 1
