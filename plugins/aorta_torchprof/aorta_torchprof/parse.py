"""Turn the Kineto traces of an artifact folder into ``torchprof_*`` metrics.

Every ``*.json`` / ``*.json.gz`` under the folder is read (one file per rank and profiler
cycle); GPU-lane events give kernel, memcpy/memset and overlap metrics; traces without any
GPU-lane event give CPU operator metrics instead, so nothing GPU-side is invented. Fail-soft:
a bad file costs its metrics and a warning, never an exception. Files are read through the
core's bounded reader: regular files inside the folder, within the read limit (gunzipped too).
"""

from __future__ import annotations

import warnings
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_core import FileRefused, read_limited
from aorta_torchprof.hta_overlap import overlap
from aorta_torchprof.trace import GPU_CATS, NO_CORRELATION, Trace, decode, plausible

if TYPE_CHECKING:
    import polars as pl

TOP_N = 5


@dataclass
class _Gpu:
    """GPU-lane events of all traces, as columns."""

    rank: list[int] = field(default_factory=list)
    cat: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    dur: list[float] = field(default_factory=list)


def parse_dir(artifact_dir: Path, drop_last_profiler_step: bool = False) -> dict[str, Any]:
    """All metrics of the traces under ``artifact_dir`` (``{}`` when there is none)."""
    try:
        return _parse(Path(artifact_dir), drop_last_profiler_step)
    except Exception as exc:  # fail-soft: one broken folder must not break the sweep
        warnings.warn(f"torchprof: cannot parse {artifact_dir}: {exc!r}", stacklevel=2)
        return {}


def trace_files(artifact_dir: Path) -> list[Path]:
    """Every chrome-trace candidate under ``artifact_dir``, in a stable order (FIFOs, devices
    and links out of the folder included: reading them is refused with a warning)."""
    if not artifact_dir.is_dir():
        return []
    return sorted(
        p
        for p in artifact_dir.rglob("*")
        if (p.name.endswith(".json") or p.name.endswith(".json.gz")) and not p.is_dir()
    )


def _read(path: Path, root: Path, gpu_seen: bool, drop_last: bool) -> tuple[Trace, list[Any]]:
    """One trace and its GPU lane, decoded only as far as the metrics need: lanes and
    correlations are decoded too for CPU ops (no GPU lane seen yet) and HTA's step filter."""
    data = read_limited(path, root)
    trace = decode(path, data)
    lane = _gpu_events(trace.events)
    if (not lane and not gpu_seen) or (lane and drop_last):
        trace.events = []
        trace = decode(path, data, full=True)
        lane = _hta_step_filter(trace.events, _gpu_events(trace.events)) if lane else lane
    return trace, lane


def _parse(artifact_dir: Path, drop_last: bool) -> dict[str, Any]:
    gpu = _Gpu()
    cpu_ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    ranks: set[int] = set()
    count = 0
    for path in trace_files(artifact_dir):
        try:
            trace, lane = _read(path, artifact_dir, bool(gpu.rank), drop_last)
        except FileRefused as exc:
            warnings.warn(f"torchprof: {exc}; its metrics are omitted", stacklevel=3)
            continue
        except (OSError, ValueError, EOFError, zlib.error) as exc:  # zlib: a corrupt .gz body
            warnings.warn(f"torchprof: skipping {path}: {exc}", stacklevel=3)
            continue
        count += 1
        ranks.add(trace.rank)
        if lane:
            gpu.rank += [trace.rank] * len(lane)
            gpu.cat += [e.cat.lower() for e in lane]
            gpu.name += [e.name for e in lane]
            gpu.ts += [e.ts for e in lane]
            gpu.dur += [e.dur for e in lane]
        elif not gpu.rank:
            for name, (self_us, calls) in _cpu_self_times(trace.events).items():
                cpu_ops[name][0] += self_us
                cpu_ops[name][1] += calls
        trace.events = []  # free the decoded events before the next file
    if count == 0:
        warnings.warn(
            f"torchprof: no Kineto trace (*.json, *.json.gz) in {artifact_dir}", stacklevel=3
        )
        return {}
    metrics: dict[str, Any] = {"torchprof_trace_count": count, "torchprof_rank_count": len(ranks)}
    if gpu.rank:
        metrics.update(_gpu_metrics(gpu))
    elif cpu_ops:
        metrics.update(_cpu_metrics(cpu_ops))
    return metrics


def _gpu_events(events: list[Any]) -> list[Any]:
    """The trace's complete GPU-lane events."""
    return [e for e in events if e.cat in GPU_CATS and plausible(e)]


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


def _gpu_metrics(gpu: _Gpu) -> dict[str, Any]:
    # Imported here, after every trace's bytes are freed: polars costs ~32 MB of RSS, which
    # would otherwise add to the peak reached while a large trace is being decoded.
    import polars as pl

    frame = pl.DataFrame(
        {"rank": gpu.rank, "cat": gpu.cat, "name": gpu.name, "ts": gpu.ts, "dur": gpu.dur},
        schema={
            "rank": pl.Int64,
            "cat": pl.Utf8,
            "name": pl.Utf8,
            "ts": pl.Float64,
            "dur": pl.Float64,
        },
    )
    kernels = frame.filter(pl.col("cat") == "kernel")
    out: dict[str, Any] = {
        "torchprof_kernel_count": kernels.height,
        "torchprof_gpu_time_ms": float(kernels["dur"].sum()) / 1e3,
        "torchprof_memcpy_ms": float(frame.filter(pl.col("cat") == "gpu_memcpy")["dur"].sum())
        / 1e3,
        "torchprof_memset_ms": float(frame.filter(pl.col("cat") == "gpu_memset")["dur"].sum())
        / 1e3,
    }
    if kernels.height:
        top = _top(kernels, "name", "dur")
        out["torchprof_top_kernel_ms"] = top[0][1] / 1e3
        out["torchprof_top_kernels"] = [name for name, _ in top]
    out.update(_rank_spread(kernels))
    out.update(_overlap_metrics(frame))
    return out


def _top(frame: pl.DataFrame, key: str, value: str) -> list[tuple[str, float]]:
    """The ``TOP_N`` keys with the largest summed value, hottest first (ties by name)."""
    import polars as pl

    sums = (
        frame.group_by(key)
        .agg(pl.col(value).sum())
        .sort([value, key], descending=[True, False])
        .head(TOP_N)
    )
    return list(zip(sums[key].to_list(), sums[value].to_list(), strict=True))


def _rank_spread(kernels: pl.DataFrame) -> dict[str, Any]:
    """Worst/best rank GPU time when several ranks ran kernels."""
    import polars as pl

    per_rank = kernels.group_by("rank").agg(pl.col("dur").sum())["dur"]
    if per_rank.len() < 2:
        return {}
    worst, best = float(per_rank.max()), float(per_rank.min())
    out = {
        "torchprof_rank_gpu_time_max_ms": worst / 1e3,
        "torchprof_rank_gpu_time_min_ms": best / 1e3,
    }
    if best > 0:
        out["torchprof_rank_gpu_time_ratio"] = worst / best
    return out


def _overlap_metrics(frame: pl.DataFrame) -> dict[str, Any]:
    """HTA's comm/compute overlap per rank, averaged over ranks (ratio: ranks with comm)."""
    per_rank = [
        overlap(part["name"].to_list(), part["ts"], part["dur"])
        for part in frame.partition_by("rank", maintain_order=True)
    ]
    out: dict[str, Any] = {
        "torchprof_compute_ms": sum(o.compute_us for o in per_rank) / len(per_rank) / 1e3
    }
    ratios = [o.ratio for o in per_rank if o.ratio is not None]
    if ratios:
        out["torchprof_comm_ms"] = sum(o.comm_us for o in per_rank) / len(per_rank) / 1e3
        out["torchprof_comm_compute_overlap_ms"] = (
            sum(o.overlap_us for o in per_rank) / len(per_rank) / 1e3
        )
        out["torchprof_overlap_ratio"] = sum(ratios) / len(ratios)
        out["torchprof_overlap_ratio_min"] = min(ratios)
    return out


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


def _cpu_metrics(cpu_ops: dict[str, list[float]]) -> dict[str, Any]:
    import polars as pl

    frame = pl.DataFrame(
        {"name": list(cpu_ops), "self": [v[0] for v in cpu_ops.values()]},
        schema={"name": pl.Utf8, "self": pl.Float64},
    )
    top = _top(frame, "name", "self")
    return {
        "torchprof_cpu_op_count": int(sum(v[1] for v in cpu_ops.values())),
        "torchprof_cpu_op_ms": float(frame["self"].sum()) / 1e3,
        "torchprof_top_cpu_op_ms": top[0][1] / 1e3,
        "torchprof_top_cpu_ops": [name for name, _ in top],
    }
