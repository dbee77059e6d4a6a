"""Turn a rocprof artifact folder into ``rocprof_*`` metrics, fail-soft.

Files are found recursively: with ``-o`` rocprofv3 writes them flat, without it under
``<host>/<pid>_*.csv``, and ``-i`` passes add ``pmc_<n>/`` or ``pass_<n>/``. Kernel time comes
from the stats CSVs when they are usable, else from the dispatch spans of the kernel traces.
Every problem costs metrics and raises a warning, never an exception; a file the core's bounded
reader refuses (a FIFO, a device, a link out of the folder, over the read limit) too.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from aorta_core.api import FileRefused, KernelRow, files_under, json_number
from aorta_rocprof.tables import Spans, Totals, read_dispatches, read_spans, read_stats

STATS_GLOBS = ("*_kernel_stats.csv", "results.stats.csv")
TRACE_GLOBS = ("*_kernel_trace.csv", "results.csv")
COPY_GLOB = "*_memory_copy_trace.csv"
RCCL_API_GLOB = "*_rccl_api_trace.csv"
#: RCCL / NCCL / MSCCL device kernels, as they appear in kernel traces on ROCm.
RCCL_KERNEL = re.compile(r"(nccl|rccl|msccl)", re.IGNORECASE)
TOP_N = 5
NS_PER_MS = 1e6

T = TypeVar("T")


def _read_each(
    root: Path, patterns: tuple[str, ...], reader: Callable[[Path, Path], T | None], what: str
) -> list[T]:
    """Apply ``reader`` to every file the patterns find under ``root``; a file that is refused,
    fails or lacks the columns is a warning."""
    results = []
    for path in sorted({p for pattern in patterns for p in files_under(root, pattern)}):
        try:
            result = reader(path, root)
        except FileRefused as exc:
            warnings.warn(f"rocprof: {exc}; its metrics are omitted", stacklevel=3)
            continue
        except (Exception, pl.exceptions.PanicException) as exc:
            reason = f"{exc}".splitlines()[0] if f"{exc}" else type(exc).__name__
            warnings.warn(f"rocprof: cannot read {what} {path}: {reason}", stacklevel=3)
            continue
        if result is None:
            warnings.warn(f"rocprof: {path} lacks the columns of a {what}; skipped", stacklevel=3)
            continue
        results.append(result)
    return results


def _merge(parts: list[Totals], what: str) -> Totals | None:
    if not parts:
        return None
    totals = Totals()
    for part in parts:
        totals.merge(part)
    if totals.dropped:
        warnings.warn(
            f"rocprof: dropped {totals.dropped} {what} row(s) with no name or a negative, "
            "wrapped or unreadable duration",
            stacklevel=3,
        )
    return totals if totals.ns else None


def kernel_totals(root: Path) -> Totals | None:
    """Per-kernel totals from the stats CSVs, else from the kernel traces."""
    stats = _merge(_read_each(root, STATS_GLOBS, read_stats, "kernel stats CSV"), "stats")
    if stats is not None:
        return stats
    return _merge(_read_each(root, TRACE_GLOBS, read_dispatches, "kernel trace CSV"),
                  "kernel trace")


def kernel_metrics(totals: Totals) -> dict[str, Any]:
    """GPU time, hottest kernels, kernel count (only when every call count was readable)."""
    ranked = sorted(totals.ns.items(), key=lambda kv: (-kv[1], kv[0]))
    metrics: dict[str, Any] = {
        "rocprof_gpu_time_ms": sum(totals.ns.values()) / NS_PER_MS,
        "rocprof_top_kernel_ms": ranked[0][1] / NS_PER_MS,
        "rocprof_top_kernels": [name for name, _ in ranked[:TOP_N]],
    }
    if totals.counts_trusted:
        metrics["rocprof_kernel_count"] = sum(totals.calls.values())
    else:
        warnings.warn("rocprof: unreadable call counts; rocprof_kernel_count omitted", stacklevel=2)
    rccl = [ns for name, ns in totals.ns.items() if RCCL_KERNEL.search(name)]
    if rccl:
        metrics["rocprof_rccl_kernel_ms"] = sum(rccl) / NS_PER_MS
    return metrics


def usable_spans(parts: list[Spans], what: str) -> list[Spans]:
    """``parts``, or none when not one row of them was usable: their metrics would read 0 ms and
    0 copies, as if measured. Dropped rows are one warning."""
    dropped = sum(p.dropped for p in parts)
    if dropped:
        warnings.warn(f"rocprof: dropped {dropped} {what} row(s) with a missing, unreadable or "
                      "negative span", stacklevel=3)
    if parts and not any(p.count for p in parts):
        warnings.warn(f"rocprof: no usable row in the {what}; its metrics are omitted",
                      stacklevel=3)
        return []
    return parts


def copy_metrics(parts: list[Spans]) -> dict[str, Any]:
    if not parts:
        return {}
    metrics: dict[str, Any] = {
        "rocprof_memcpy_ms": sum(p.ns for p in parts) / NS_PER_MS,
        "rocprof_memcpy_count": sum(p.count for p in parts),
    }
    if all(p.bytes is not None for p in parts):
        metrics["rocprof_memcpy_bytes"] = sum(p.bytes or 0 for p in parts)
    return metrics


def _json_safe(metrics: dict[str, Any]) -> dict[str, Any]:
    """Numbers JSON can carry: a count beyond 64 bits (``Calls`` of 1e300) becomes a float, a
    sum that overflowed to inf/nan is omitted (a number not measured is omitted)."""
    for key, value in list(metrics.items()):
        number = json_number(value) if isinstance(value, int | float) else value
        if number is None:
            warnings.warn(f"rocprof: {key} is not finite; omitted", stacklevel=2)
            del metrics[key]
        else:
            metrics[key] = number
    if "rocprof_gpu_time_ms" not in metrics:
        for key in ("rocprof_top_kernel_ms", "rocprof_top_kernels", "rocprof_kernel_count"):
            metrics.pop(key, None)
    return metrics


def parse_metrics(artifact_dir: Path) -> dict[str, Any]:
    """All ``rocprof_*`` metrics the folder supports (``rocprof_artifact_dir`` comes from core)."""
    root = Path(artifact_dir)
    if not root.is_dir():
        warnings.warn(f"rocprof: artifact folder {root} does not exist", stacklevel=2)
        return {}
    metrics: dict[str, Any] = {}
    totals = kernel_totals(root)
    if totals is not None:
        metrics.update(kernel_metrics(totals))
    copy = "memory copy trace"
    metrics.update(copy_metrics(usable_spans(_read_each(root, (COPY_GLOB,), read_spans, copy),
                                             copy)))
    api = usable_spans(_read_each(root, (RCCL_API_GLOB,), read_spans, "RCCL API trace"),
                       "RCCL API trace")
    if api:
        metrics["rocprof_rccl_api_ms"] = sum(p.ns for p in api) / NS_PER_MS
    if not metrics:
        warnings.warn(
            f"rocprof: no usable rocprofv3 CSV in {root} (rocprofv3 writes nothing when no GPU "
            "work ran, and only output_format=csv is parsed)",
            stacklevel=2,
        )
    return _json_safe(metrics)


def kernel_rows(artifact_dir: Path) -> list[KernelRow]:
    """One row per kernel (dispatches and summed duration; rocprof has no steps), from the
    totals ``parse_metrics`` reads; ``[]`` (one warning) where the call counts are not to be
    trusted."""
    totals = kernel_totals(Path(artifact_dir))
    if totals is None:
        return []
    if not totals.counts_trusted:
        warnings.warn("rocprof: kernel call counts are unreadable; no kernel table", stacklevel=2)
        return []
    return [KernelRow(name, totals.calls.get(name, 0), ns / NS_PER_MS, "gpu_kernel")
            for name, ns in totals.ns.items()]
