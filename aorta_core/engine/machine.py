"""The GPUs a workload launched from here may use, so that ``auto`` settings fit the machine.

torch is the authority (it is what the workload will see): it honours ``CUDA_VISIBLE_DEVICES``
on CUDA and ``HIP_VISIBLE_DEVICES``/``ROCR_VISIBLE_DEVICES`` on ROCm. It is imported only when a
setting asks for ``auto``; without torch the machine counts as having no GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

#: Variables that restrict which GPUs a child process sees, by platform.
VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Gpus:
    platform: str  # "cuda", "rocm" or "none"
    count: int
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        if not self.count:
            return "no GPU"
        kind = "ROCm" if self.platform == "rocm" else "CUDA"
        names = sorted(set(self.names))
        return f"{self.count} {kind} GPU{'s' if self.count > 1 else ''}" + (
            f" ({', '.join(names)})" if names else "")


@functools.cache
def visible_gpus() -> Gpus:
    """The GPUs this process may use (the cell's own restriction is applied by :func:`for_env`)."""
    try:
        import torch
    except ImportError:
        return Gpus("none", 0)
    if not torch.cuda.is_available():
        return Gpus("none", 0)
    count = torch.cuda.device_count()
    names = tuple(torch.cuda.get_device_name(i) for i in range(count))
    return Gpus("rocm" if torch.version.hip else "cuda", count, names)


def _listed(value: str) -> int:
    return len([v for v in value.split(",") if v.strip()])


def for_env(cell_env: Mapping[str, str]) -> Gpus:
    """The GPUs a child sees when the cell's environment narrows them (``+env.CUDA_VISIBLE_DEVICES``
    or a parallel device slot): at most as many as are listed there."""
    gpus = visible_gpus()
    listed = [_listed(cell_env[k]) for k in VISIBLE_DEVICES if k in cell_env]
    if not listed or not gpus.count:
        return gpus
    count = min(gpus.count, *listed)
    return Gpus(gpus.platform if count else "none", count, gpus.names[:count])
