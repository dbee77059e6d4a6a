"""One Kineto trace file -> a small :class:`FileSummary` (the per-rank work of a parse).

Runs in a worker process of :func:`aorta_core.api.parallel_map` (or in-process for a single file),
so the decoded events never leave it: what goes back is per-file sums, kernel time per name and
the file's communication/computation overlap, from which the parent derives every cross-rank
metric. The merged intervals go back only for a file whose rank has other files (profiler
cycles), as that rank's overlap is taken over the union of its files: 64 ranks' intervals were
most of the parent's memory. The GPU lane is selected and summed by C-level iteration and
numpy, so the work after the decode is a small fraction of the decode itself.
"""

from __future__ import annotations

import errno
import math
import mmap
import zlib
from collections import defaultdict
from collections.abc import Container
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from aorta_core.api import FileRefused, mapped_limited, merge, without_bom
from aorta_torchprof.hta_overlap import (
    COMMUNICATION,
    COMPUTATION,
    MEMORY,
    OTHER,
    Overlap,
    kernel_class,
)
from aorta_torchprof.trace import GPU_CATS, MAX_US, NO_CORRELATION, decode, plausible

#: GPU-lane categories by what they add to: kernel, memcpy, memset, or nothing (cuda_sync).
_KIND = {cat: ("kernel", "gpu_memcpy", "gpu_memset").index(cat.lower())
         if cat.lower() != "cuda_sync" else 3 for cat in GPU_CATS}
_CLASS = {OTHER: 0, COMMUNICATION: 1, COMPUTATION: 2, MEMORY: 3}


@dataclass
class GpuLane:
    """One file's GPU lane, summed; intervals are ``[2, n]`` arrays in µs after ``base_us``."""

    kernel_count: int
    kernel_us: float
    memcpy_us: float
    memset_us: float
    kernel_us_by_name: dict[str, float]
    base_us: float
    overlap: Overlap
    #: Empty unless the parent asked for them (the rank has other files).
    comm: np.ndarray
    compute: np.ndarray


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
        trace = decode(path, data)
        lane = _Lane.of([e for e in trace.events if e.cat in GPU_CATS])
        if lane is None or drop_last:
            trace.events = []  # free the first decode before the second
            trace = decode(path, data, full=True)
            events = [e for e in trace.events if e.cat in GPU_CATS]
            lane = _Lane.of(_hta_step_filter(trace.events, events) if drop_last else events)
    except ValueError as exc:
        return FileSummary(path, skipped=f"skipping {path}: {exc}")
    if lane is not None:
        return FileSummary(path, trace.rank, gpu=lane.summary(keep))
    return FileSummary(path, trace.rank, cpu_ops=_cpu_self_times(trace.events))


@dataclass
class _Lane:
    """The complete GPU-lane events with a real clock's span (:func:`plausible`), as columns."""

    names: list[str]
    kind: np.ndarray
    ts: np.ndarray
    dur: np.ndarray

    @classmethod
    def of(cls, events: list[Any]) -> _Lane | None:
        """``None`` when no event is left."""
        n = len(events)
        lane = cls([e.name for e in events], np.fromiter((_KIND[e.cat] for e in events),
                                                          np.int8, n),
                   np.fromiter((e.ts for e in events), float, n),
                   np.fromiter((e.dur for e in events), float, n))
        ok = ((lane.dur >= 0) & (lane.dur <= MAX_US) & (lane.ts >= -MAX_US)
              & (lane.ts <= MAX_US))
        if any(e.ph != "X" for e in events):
            ok &= np.fromiter((e.ph == "X" for e in events), bool, n)
        if not ok.all():
            lane = cls(list(compress(lane.names, ok.tolist())), lane.kind[ok], lane.ts[ok],
                       lane.dur[ok])
        return lane if lane.names else None

    def summary(self, keep_intervals: bool) -> GpuLane:
        unique = list(dict.fromkeys(self.names))
        code = np.fromiter(map({name: i for i, name in enumerate(unique)}.__getitem__,
                               self.names), np.intp, len(self.names))
        kernel = self.kind == 0
        per_name = np.bincount(code[kernel], weights=self.dur[kernel], minlength=len(unique))
        used = np.bincount(code[kernel], minlength=len(unique))
        cls = np.array([_CLASS[kernel_class(name)] for name in unique], np.int8)[code]
        base = float(self.ts.min())
        start = self.ts - base
        end = start + self.dur
        comm, comp = cls == _CLASS[COMMUNICATION], cls == _CLASS[COMPUTATION]
        comm, comp = merge(start[comm], end[comm]), merge(start[comp], end[comp])
        none = np.empty((2, 0))
        return GpuLane(
            kernel_count=int(kernel.sum()),
            kernel_us=math.fsum(self.dur[kernel].tolist()),
            memcpy_us=math.fsum(self.dur[self.kind == 1].tolist()),
            memset_us=math.fsum(self.dur[self.kind == 2].tolist()),
            kernel_us_by_name={name: float(us) for name, us, k in zip(unique, per_name, used,
                                                                      strict=True) if k},
            base_us=base,
            overlap=Overlap.of(comm, comp),
            comm=comm if keep_intervals else none,
            compute=comp if keep_intervals else none,
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
