"""The ncu collector's hook implementations (entry point ``ncu`` in aorta.collectors).

Built only on what docs/plugins.md documents. Kept cheap to import: polars is loaded only when
artifacts are parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aorta_core.api import Claim, CollectorInfo, KernelRow, Launch, TrialRun, hookimpl
from aorta_ncu.collect import collect
from aorta_ncu.options import NcuOptions, validate
from aorta_ncu.wrap import wrap


@hookimpl
def aorta_collector() -> CollectorInfo:
    return CollectorInfo(
        description="NVIDIA Nsight Compute: per-kernel time and hardware throughput of any command",
        options=NcuOptions,
        config_package="aorta_ncu.conf",
        wrap_order=5,
        times_comparable=False,
    )


@hookimpl
def check_options(options: Any, selected: Mapping[str, Any]) -> None:
    validate(options)


@hookimpl
def resource_claims(options: Any) -> list[Claim]:
    return [Claim("gpu-kernels", exclusive=True, why="it serialises and replays every kernel, "
                  "so a tracer beside it would time the replays")]


@hookimpl
def wrap_argv(launch: Launch, options: Any, artifact_dir: Path) -> Launch:
    return wrap(launch, options, artifact_dir)


@hookimpl
def collect_artifacts(artifact_dir: Path, options: Any, run: TrialRun) -> list[Path]:
    return collect(artifact_dir, options, run)


@hookimpl
def kernel_table(artifact_dir: Path, options: Any) -> list[KernelRow]:
    from aorta_ncu.parse import kernel_rows

    return kernel_rows(artifact_dir)


@hookimpl
def parse_metrics(artifact_dir: Path, options: Any) -> dict[str, Any]:
    from aorta_ncu.parse import parse_metrics as parse

    return parse(artifact_dir)
