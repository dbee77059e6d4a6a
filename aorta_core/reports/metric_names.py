"""How report.html names and groups metrics: a metric's shown name spells its unit
(``workload_step_time_ms`` → ``workload step time (ms)``), and each metric belongs to one group
(throughput, time, communication, memory, one per collector by its prefix, other).

Names are read, never renamed in the data: matrix.json, matrix.parquet and perf.md keep the
metric's own name, and the page shows it on hover. The rules are suffixes and words of the
name, so a metric a collector or workload adds later is named and grouped the same way."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from aorta_core.engine.matrix import WALL

#: Name endings and the unit they spell, first match wins (``_per_s`` before ``_s``).
_UNITS: tuple[tuple[str, str], ...] = (
    ("_tflops", "TFLOP/s"), ("_gflops", "GFLOP/s"), ("_per_s", "per s"), ("_pct", "%"),
    ("_ms", "ms"), ("_us", "µs"), ("_ns", "ns"), ("_s", "s"), ("_bytes", "bytes"),
    ("_mib", "MiB"), ("_mb", "MB"), ("_gib", "GiB"), ("_gb", "GB"), ("_kb", "KB"),
    ("_ratio", "ratio"), ("_fraction", "fraction"), ("_count", "count"),
)
#: A time per something: ``wall_ms_per_step`` → ``ms/step``.
_PER = re.compile(r"_(ms|us|ns|s)_per_([a-z]+)$")
#: Words shown in capitals.
_UPPER = {"gpu": "GPU", "cpu": "CPU", "sm": "SM", "dram": "DRAM", "l2": "L2", "hbm": "HBM",
          "rss": "RSS", "ddp": "DDP", "fsdp": "FSDP", "mad": "MAD", "op": "op", "ops": "ops"}

#: Groups in the order the page shows them; a metric is in the first whose pattern its name
#: matches (searched anywhere in it). A collector's group (``<collector>_...``) comes first.
GROUPS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("throughput", re.compile(r"_per_s$|flops|throughput|bandwidth")),
    ("communication", re.compile(r"allreduce|allgather|reducescatter|comm|overlap|nccl|rccl|"
                                 r"collective|hidden")),
    ("memory", re.compile(r"mem|bytes|rss|alloc|_[mgk]i?b$")),
    ("time", re.compile(r"_(ms|us|ns|s)(_|$)|time|fraction|idle")),
)
OTHER = "other"


def unit_of(metric: str) -> tuple[str, str]:
    """``metric`` split into its words and its unit (``""`` when its name spells none)."""
    if metric == WALL:
        return "wall time", "s"
    if match := _PER.search(metric):
        return metric[: match.start()], f"{match[1].replace('us', 'µs')}/{match[2]}"
    for suffix, unit in _UNITS:
        if metric.endswith(suffix) and len(metric) > len(suffix):
            stem = metric[: -len(suffix)]
            if suffix in ("_ratio", "_fraction", "_count"):
                return metric, ""  # the word is the unit: 'overlap ratio', 'kernel count'
            return stem, unit
    return metric, ""


def shown_name(metric: str) -> str:
    """The name the page shows: words, capitals for acronyms, the unit in parentheses."""
    stem, unit = unit_of(metric)
    words = " ".join(_UPPER.get(w, w) for w in stem.split("_") if w)
    return f"{words} ({unit})" if unit else words


def group_of(metric: str, collectors: Iterable[str] = ()) -> str:
    """The group of ``metric``: the collector whose name prefixes it, else the first of
    :data:`GROUPS` whose words it holds, else :data:`OTHER`."""
    for name in sorted(collectors, key=len, reverse=True):
        if metric.startswith(f"{name}_"):
            return name
    for group, pattern in GROUPS:
        if pattern.search(metric):
            return group
    return OTHER


def grouped(metrics: Sequence[str], collectors: Iterable[str] = ()) -> list[tuple[str, list[str]]]:
    """``metrics`` by group, groups in page order (:data:`GROUPS`, then collectors by name,
    then other), each group's metrics in the given order."""
    collectors = sorted(set(collectors))
    order = [g for g, _ in GROUPS] + collectors + [OTHER]
    groups: dict[str, list[str]] = {}
    for metric in metrics:
        groups.setdefault(group_of(metric, collectors), []).append(metric)
    return [(g, groups[g]) for g in order if g in groups]
