"""Turn the Kineto traces of an artifact folder into ``torchprof_*`` metrics.

Every ``*.json`` / ``*.json.gz`` under the folder is read (one file per rank and profiler
cycle); GPU-lane events give kernel, memcpy/memset and overlap metrics; traces without any
GPU-lane event give CPU operator metrics instead, so nothing GPU-side is invented. Fail-soft:
a bad file costs its metrics and a warning, never an exception. Files are read through the
core's bounded reader: regular files inside the folder, within the read limit (gunzipped too).

Speed: each file is decoded and summed in its own worker process
(:func:`aorta_core.api.parallel_map`, :mod:`aorta_torchprof.summary`), so eight rank traces take
about as long as the largest one where there are eight cores, and this process holds per-file
sums, never a decoded trace (and a file's intervals only when its rank has other files). Only
the cross-rank aggregation runs here.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path
from typing import Any

from aorta_core.api import (
    KernelRow,
    decoded_bytes,
    files_under,
    merged,
    parallel_map,
    rank_in_head,
    read_limited,
)
from aorta_torchprof.hta_overlap import Overlap
from aorta_torchprof.session import NO_TRACE_SUFFIX, STEP_ON_SUFFIX
from aorta_torchprof.summary import FileSummary, GpuLane, summarise

TOP_N = 5
#: Peak memory of a worker per byte of trace it reads, planned for a trace decoded whole (the
#: bytes, every decoded event and the interpreter; bench/bench_torchprof_parse.py): one read in
#: pieces (:func:`aorta_torchprof.trace.decode_lane`) peaks near 1x, but a small, gzipped or
#: uncuttable trace is decoded whole.
MEMORY_PER_BYTE = 2.5
#: A session's no-trace or step-on note is one line.
_NOTE_LIMIT = 4096


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
    return [p for p in files_under(artifact_dir) if p.name.endswith((".json", ".json.gz"))]


def _need(path: Path) -> int:
    try:
        return int(MEMORY_PER_BYTE * decoded_bytes(path))
    except OSError:
        return 0  # the worker's read says why


def _sharing_a_rank(files: list[Path], artifact_dir: Path) -> frozenset[Path] | None:
    """The files whose rank has other files too (their intervals join on the rank's clock), from
    each file's head; ``None`` (every file) when a head names no rank."""
    heads = [rank_in_head(path, artifact_dir) for path in files]
    if None in heads:
        return None
    count = Counter(heads)
    return frozenset(path for path, rank in zip(files, heads, strict=True) if count[rank] > 1)


def _summaries(files: list[Path], artifact_dir: Path, drop_last: bool) -> list[FileSummary]:
    out = []
    work = partial(summarise, root=artifact_dir, drop_last=drop_last,
                   intervals_for=_sharing_a_rank(files, artifact_dir))
    for done in parallel_map(work, files, need=_need):
        if done.error is None and done.value.skipped is None:
            out.append(done.value)
        elif done.error is None:
            warnings.warn(f"torchprof: {done.value.skipped}", stacklevel=4)
        elif done.memory:
            warnings.warn(f"torchprof: {done.item} could not be parsed in the memory this "
                          f"process may use: {done.error}; its metrics are omitted (parse it "
                          "where more memory is free)", stacklevel=4)
        else:
            warnings.warn(f"torchprof: cannot parse {done.item}: {done.error}", stacklevel=4)
    return out


def _notes(artifact_dir: Path, suffix: str) -> list[str]:
    """What the ranks' sessions wrote in their ``rank<R><suffix>`` notes, rank by rank."""
    notes = sorted(artifact_dir.glob(f"rank*{suffix}")) if artifact_dir.is_dir() else []
    return [read_limited(n, artifact_dir, _NOTE_LIMIT).decode(errors="replace").strip()
            for n in notes]


def _no_trace_reason(artifact_dir: Path) -> str:
    """What the ranks' sessions said when they wrote no trace, or where to look."""
    return "; ".join(_notes(artifact_dir, NO_TRACE_SUFFIX)) or (
        "nothing wrote one there (the workload ended before a profiler exported a trace, or it "
        "crashed first); see the trial's stderr.log")


#: The per-step rows of the folder parsed last in this process: ``kernel_table`` runs right
#: after ``parse_metrics`` in the same process and takes them instead of reading the traces
#: again (traces reach 100+ MB).
_last_rows: dict[Path, list[KernelRow]] = {}


def kernel_rows(artifact_dir: Path, drop_last_profiler_step: bool = False) -> list[KernelRow]:
    """The ``kernel_table`` of ``artifact_dir``: GPU kernels per step, else CPU ops' self time
    per step, summed over the folder's files (ranks, profiler cycles)."""
    folder = Path(artifact_dir).resolve()
    if folder not in _last_rows:
        parse_dir(Path(artifact_dir), drop_last_profiler_step)
    return _last_rows.get(folder, [])


def _table(summaries: list[FileSummary]) -> list[KernelRow]:
    kind = "gpu_kernel" if any(s.gpu is not None for s in summaries) else "cpu_op"
    totals: dict[tuple[str, int | None], list[float]] = defaultdict(lambda: [0, 0.0])
    for summary in summaries:
        if (summary.gpu is not None) is (kind == "gpu_kernel"):
            for name, step, calls, us in summary.rows or []:
                totals[(name, step)][0] += calls
                totals[(name, step)][1] += us
    return [KernelRow(name, int(calls), us / 1e3, kind, step)
            for (name, step), (calls, us) in totals.items()]


def _parse(artifact_dir: Path, drop_last: bool) -> dict[str, Any]:
    files = trace_files(artifact_dir)
    if not files:
        warnings.warn(f"torchprof: no Kineto trace (*.json, *.json.gz) in {artifact_dir}: "
                      f"{_no_trace_reason(artifact_dir)}", stacklevel=3)
    summaries = _summaries(files, artifact_dir, drop_last)
    _last_rows.clear()
    _last_rows[artifact_dir.resolve()] = _table(summaries)
    if not summaries:
        return {}  # each file said why
    metrics: dict[str, Any] = {
        "torchprof_trace_count": len(summaries),
        "torchprof_rank_count": len({s.rank for s in summaries}),
    }
    steps = [s.step_us for s in summaries if s.step_us is not None]
    if steps:  # each file's (rank's) time per profiled step, in the window of the rows
        metrics["torchprof_step_time_ms"] = math.fsum(steps) / len(steps) / 1e3
    lanes = [(s.rank, s.gpu) for s in summaries if s.gpu is not None]
    if lanes:
        metrics.update(_gpu_metrics(lanes))
    else:
        metrics.update(_cpu_metrics([s.cpu_ops for s in summaries if s.cpu_ops]))
    followed = sorted(set(_notes(artifact_dir, STEP_ON_SUFFIX)) - {""})
    if followed:  # step_on=auto: the optimizer's steps, or the whole run (ranks apart: both)
        metrics["torchprof_step_on"] = ",".join(followed)
    return metrics


def _gpu_metrics(lanes: list[tuple[int, GpuLane]]) -> dict[str, Any]:
    kernels = sum(lane.kernel_count for _, lane in lanes)
    out: dict[str, Any] = {
        "torchprof_kernel_count": kernels,
        "torchprof_gpu_time_ms": math.fsum(lane.kernel_us for _, lane in lanes) / 1e3,
        "torchprof_memcpy_ms": math.fsum(lane.memcpy_us for _, lane in lanes) / 1e3,
        "torchprof_memset_ms": math.fsum(lane.memset_us for _, lane in lanes) / 1e3,
    }
    if kernels:
        by_name: dict[str, float] = defaultdict(float)
        for _, lane in lanes:
            for name, us in lane.kernel_us_by_name.items():
                by_name[name] += us
        top = _top(by_name)
        out["torchprof_top_kernel_ms"] = top[0][1] / 1e3
        out["torchprof_top_kernels"] = [name for name, _ in top]
    out.update(_rank_spread(lanes))
    out.update(_overlap_metrics(lanes))
    return out


def _top(totals: dict[str, float]) -> list[tuple[str, float]]:
    """The ``TOP_N`` keys with the largest total, hottest first (ties by name)."""
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:TOP_N]


def _rank_spread(lanes: list[tuple[int, GpuLane]]) -> dict[str, Any]:
    """Worst/best rank GPU time when several ranks ran kernels."""
    per_rank: dict[int, list[float]] = defaultdict(list)
    for rank, lane in lanes:
        if lane.kernel_count:
            per_rank[rank].append(lane.kernel_us)
    if len(per_rank) < 2:
        return {}
    totals = [math.fsum(parts) for parts in per_rank.values()]
    worst, best = max(totals), min(totals)
    out = {
        "torchprof_rank_gpu_time_max_ms": worst / 1e3,
        "torchprof_rank_gpu_time_min_ms": best / 1e3,
    }
    if best > 0:
        out["torchprof_rank_gpu_time_ratio"] = worst / best
    return out


def _rank_overlap(lanes: list[GpuLane]) -> Overlap:
    """One rank's overlap over all its files (profiler cycles), on the rank's earliest clock."""
    if len(lanes) == 1:
        return lanes[0].overlap
    base = min(lane.base_us for lane in lanes)
    comm, compute = (merged((start + lane.base_us - base, end + lane.base_us - base)
                            for lane in lanes for start, end in getattr(lane, kind))
                     for kind in ("comm", "compute"))
    return Overlap.of(comm, compute)


def _overlap_metrics(lanes: list[tuple[int, GpuLane]]) -> dict[str, Any]:
    """HTA's comm/compute overlap per rank, averaged over ranks (ratio: ranks with comm)."""
    by_rank: dict[int, list[GpuLane]] = defaultdict(list)
    for rank, lane in lanes:
        by_rank[rank].append(lane)
    per_rank = [_rank_overlap(parts) for parts in by_rank.values()]
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


def _cpu_metrics(files: list[dict[str, tuple[float, int]]]) -> dict[str, Any]:
    if not files:
        return {}
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for ops in files:
        for name, (self_us, calls) in ops.items():
            totals[name][0] += self_us
            totals[name][1] += calls
    top = _top({name: v[0] for name, v in totals.items()})
    return {
        "torchprof_cpu_op_count": int(sum(v[1] for v in totals.values())),
        "torchprof_cpu_op_ms": math.fsum(v[0] for v in totals.values()) / 1e3,
        "torchprof_top_cpu_op_ms": top[0][1] / 1e3,
        "torchprof_top_cpu_ops": [name for name, _ in top],
    }
