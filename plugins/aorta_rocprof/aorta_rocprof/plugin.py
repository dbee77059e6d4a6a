"""The rocprof collector's hook implementations (entry point ``rocprof`` in aorta.collectors).

Kept cheap to import: polars is loaded only when artifacts are parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aorta_core.api import Claim, CollectorInfo, KernelRow, Launch, hookimpl
from aorta_rocprof.options import RocprofOptions, validate
from aorta_rocprof.wrap import wrap


@hookimpl
def aorta_collector() -> CollectorInfo:
    return CollectorInfo(
        description="AMD rocprofv3: kernel/HIP/RCCL/copy traces and stats of any command",
        options=RocprofOptions,
        config_package="aorta_rocprof.conf",
        wrap_order=10,
    )


@hookimpl
def check_options(options: Any, selected: Mapping[str, Any]) -> None:
    validate(options)


@hookimpl
def resource_claims(options: Any) -> list[Claim]:
    return [Claim("hsa-queues", exclusive=True, why="rocprofv3 intercepts the HSA queues, "
                  "which one tool at a time can hold"),
            Claim("gpu-kernels", why="rocprofv3 traces the kernels as they run")]


@hookimpl
def wrap_argv(launch: Launch, options: Any, artifact_dir: Path) -> Launch:
    return wrap(launch, options, artifact_dir)


@hookimpl
def kernel_table(artifact_dir: Path, options: Any) -> list[KernelRow]:
    from aorta_rocprof.parse import kernel_rows

    return kernel_rows(artifact_dir)


@hookimpl
def parse_metrics(artifact_dir: Path, options: Any) -> dict[str, Any]:
    from aorta_rocprof.parse import parse_metrics as parse

    return parse(artifact_dir)
