"""Communication/computation overlap exactly as HolisticTraceAnalysis defines it.

Kernel classes follow ``hta/common/types.py`` / ``hta/utils/utils.py: get_kernel_type`` (first
match wins); intervals of one class are merged (``merge_kernel_intervals``: a new group starts
when ``ts`` is past the running maximum end: :func:`aorta_core.intervals.union_length`) and the
overlap is the time both merged sets cover.
We get ``|C ∩ P|`` as ``|C| + |P| - |C ∪ P|``, which equals HTA's +1/+2 sweep.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from aorta_core.intervals import union_length

if TYPE_CHECKING:
    import polars as pl

COMMUNICATION, MEMORY, COMPUTATION, OTHER = "communication", "memory", "computation", "other"

_COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)"
    r"|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)"
    r"|(^collective_subgraph_execution)"
)


@lru_cache(maxsize=65536)
def kernel_class(name: str) -> str:
    """HTA's kernel type of a GPU event name (``re.match`` semantics, as HTA uses)."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


@dataclass(frozen=True)
class Overlap:
    """One rank's merged communication and computation time and their overlap, in µs."""

    comm_us: float
    compute_us: float
    overlap_us: float

    @property
    def ratio(self) -> float | None:
        """HTA's ``comp_comm_overlap_ratio``; None (not 0) without communication."""
        return self.overlap_us / self.comm_us if self.comm_us > 0 else None


def overlap(names: Iterable[str], ts: pl.Series, dur: pl.Series) -> Overlap:
    """Overlap of one rank's GPU events (names, start µs, duration µs)."""
    import polars as pl

    classes = pl.Series("cls", [kernel_class(n) for n in names], dtype=pl.Categorical)
    base = ts.min() if ts.len() else 0.0
    frame = pl.DataFrame({"cls": classes, "ts": ts - base, "end": ts - base + dur})
    comm = frame.filter(pl.col("cls") == COMMUNICATION)
    comp = frame.filter(pl.col("cls") == COMPUTATION)
    both = frame.filter(pl.col("cls").is_in([COMMUNICATION, COMPUTATION]))
    comm_us = union_length(comm["ts"], comm["end"])
    comp_us = union_length(comp["ts"], comp["end"])
    inter = comm_us + comp_us - union_length(both["ts"], both["end"])
    return Overlap(comm_us, comp_us, max(inter, 0.0))
