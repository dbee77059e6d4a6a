"""The ``profiling`` block, asked of the collectors' in-process sessions as ``torch_profiler``.

The block's keys beside its own are the PyTorch profiler collector's options, read from its
options type (:func:`aorta_core.benchmark.config.profiling_schema`), so nothing is copied here.
The benchmark runs no profiler of its own: :func:`torch_profiler_request` turns the block into
the request that ``aorta_core.payload.session`` hands to every collector session, and the one
that runs the PyTorch profiler takes it. A collector the sweep selected in env mode wins over
the block (its options, its folder).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from aorta_core.benchmark.config import ProfilingBlock

#: The block's own keys; every other key is one of the profiler collector's options.
OWN_KEYS = tuple(f.name for f in dataclasses.fields(ProfilingBlock))
ROCM_EXPORT_WARNING = (
    "profiling: trace export is off on ROCm (Kineto can crash in export_chrome_trace on some "
    "ROCm builds, pytorch/pytorch#138360); set profiling.rocm_trace_export=true to force it"
)


def torch_profiler_request(block: Mapping[str, Any], output_dir: Path, rank: int,
                           device: torch.device) -> dict[str, Any] | None:
    """The block as a ``torch_profiler`` request (``None`` when off): the profiler's options as
    set, one folder per rank. The schedule advances on the benchmark's iterations (``step_on:
    manual``); CUDA activity is recorded when the benchmark runs on the GPU.
    """
    if not block.get("enabled"):
        return None
    options = {key: value for key, value in block.items() if key not in OWN_KEYS}
    if torch.version.hip and not block.get("rocm_trace_export") and (
            options.get("chrome_trace") or options.get("tensorboard")):
        warnings.warn(ROCM_EXPORT_WARNING, stacklevel=2)
        options.update(chrome_trace=False, tensorboard=False)
    root = Path(block["trace_dir"]) if block.get("trace_dir") else output_dir / "torch_profiler"
    return {
        **options,
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
