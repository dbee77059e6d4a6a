"""Communication/computation overlap exactly as HolisticTraceAnalysis defines it.

Kernel classes follow ``hta/common/types.py`` / ``hta/utils/utils.py: get_kernel_type`` (first
match wins); intervals of one class are merged (``merge_kernel_intervals``: a new group starts
when ``ts`` is past the running maximum end) and the overlap is the time both merged sets cover.
We get ``|C ∩ P|`` as ``|C| + |P| - |C ∪ P|``, which equals HTA's +1/+2 sweep. The merging is
the core's one interval union (``aorta_core.api.merged``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from aorta_core.api import merged, total_length

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

    @classmethod
    def of(cls, comm: list[tuple[float, float]], compute: list[tuple[float, float]]
           ) -> Overlap:
        """From merged communication and computation intervals (:func:`merged`)."""
        comm_us, compute_us = total_length(comm), total_length(compute)
        inter = comm_us + compute_us - total_length(merged(comm + compute))
        return cls(comm_us, compute_us, max(inter, 0.0))
