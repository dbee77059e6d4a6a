"""The ``profiling`` block, asked of the collectors' in-process sessions as ``torch_profiler``.

The benchmark runs no profiler of its own: :func:`torch_profiler_request` turns the block into
the request that ``aorta_core.payload.session`` hands to every collector session, and the one
that runs the PyTorch profiler takes it. A collector the sweep selected in env mode wins over
the block (its options, its folder).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from aorta_core.benchmark.config import ProfilingConfig

#: Keys of the block that mean the same as the PyTorch profiler collector's options.
SHARED_KEYS = ("wait", "warmup", "active", "repeat", "skip_first", "record_shapes",
               "profile_memory", "with_stack", "with_flops", "gzip", "key_averages")
ROCM_EXPORT_WARNING = (
    "profiling: trace export is off on ROCm (Kineto can crash in export_chrome_trace on some "
    "ROCm builds, pytorch/pytorch#138360); set profiling.rocm_trace_export=true to force it"
)


def torch_profiler_request(cfg: ProfilingConfig, output_dir: Path, rank: int,
                           device: torch.device) -> dict[str, Any] | None:
    """The block as a ``torch_profiler`` request (``None`` when off); one folder per rank.

    The schedule advances on the benchmark's iterations (``step_on: manual``); CUDA activity is
    recorded when the benchmark runs on the GPU.
    """
    if not cfg.enabled:
        return None
    export = cfg.chrome_trace or cfg.tensorboard
    if torch.version.hip and export and not cfg.rocm_trace_export:
        warnings.warn(ROCM_EXPORT_WARNING, stacklevel=2)
        export = False
    root = Path(cfg.trace_dir) if cfg.trace_dir else output_dir / "torch_profiler"
    return {
        **{key: getattr(cfg, key) for key in SHARED_KEYS},
        "chrome_trace": cfg.chrome_trace and export,
        "tensorboard": cfg.tensorboard and export,
        "step_on": "manual",
        "activities": ["cpu", "cuda"] if device.type == "cuda" else ["cpu"],
        "dir": str(root / f"rank{rank}"),
    }


def warn_if_unserved(request: dict[str, Any] | None, running: tuple[str, ...]) -> None:
    """Say so when the block is on but no collector session runs to take it."""
    if request is not None and not running:
        warnings.warn("profiling.enabled is true, but no collector session runs in this process "
                      "(install aorta-torchprof, the PyTorch profiler collector, where the "
                      "benchmark runs); this run is not profiled", stacklevel=2)
