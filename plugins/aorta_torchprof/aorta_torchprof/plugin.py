"""The torchprof collector's hook implementations (entry point ``aorta.collectors: torchprof``).

Cheap to import: torch, numpy and msgspec load only inside the hooks that need them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aorta_core.api import (
    Claim,
    CollectorInfo,
    KernelRow,
    Launch,
    OptionError,
    PayloadSession,
    TimelineSource,
    hookimpl,
)
from aorta_torchprof.options import ACTIVITIES, MODES, STEP_ON, TorchprofOptions


@hookimpl
def aorta_collector() -> CollectorInfo:
    return CollectorInfo(
        description="PyTorch profiler (Kineto traces): kernels, CPU ops, comm/compute overlap",
        options=TorchprofOptions,
        config_package="aorta_torchprof.conf",
        wrap_order=30,
    )


@hookimpl
def payload_session(rank: int, env: Mapping[str, str], context: Mapping[str, Any]
                    ) -> PayloadSession | None:
    from aorta_torchprof.session import payload_session as session

    return session(rank, env, context)


@hookimpl
def resource_claims(options: Any) -> list[Claim]:
    return [Claim("gpu-kernels", why="the PyTorch profiler traces the kernels as they run")]


@hookimpl
def check_options(options: Any, selected: Mapping[str, Any]) -> None:
    _one_of("mode", options.mode, MODES)
    _one_of("step_on", options.step_on, STEP_ON)
    for activity in options.activities:
        _one_of("activities", activity, ACTIVITIES)
    for key in ("skip_first", "wait", "warmup", "repeat"):
        if getattr(options, key) < 0:
            raise OptionError(f"collector.torchprof.{key}={getattr(options, key)}: must be >= 0")
    if options.active < 1:
        raise OptionError(f"collector.torchprof.active={options.active}: must be >= 1")
    if not (options.chrome_trace or options.tensorboard or options.key_averages):
        raise OptionError(
            "collector.torchprof: chrome_trace, tensorboard and key_averages are all false, so "
            "nothing would be written; set chrome_trace=true"
        )


def _one_of(key: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise OptionError(
            f"collector.torchprof.{key}={value!r} is not valid; use one of: {', '.join(valid)}"
        )


@hookimpl
def wrap_argv(launch: Launch, options: Any, artifact_dir: Path) -> Launch:
    from aorta_torchprof.wrap import wrap

    return wrap(launch, options, artifact_dir)


@hookimpl
def parse_metrics(artifact_dir: Path, options: Any) -> dict[str, Any]:
    from aorta_torchprof.parse import parse_dir

    drop = bool(getattr(options, "drop_last_profiler_step", False))
    return parse_dir(Path(artifact_dir), drop_last_profiler_step=drop)


@hookimpl
def kernel_table(artifact_dir: Path, options: Any) -> list[KernelRow]:
    from aorta_torchprof.parse import kernel_rows

    drop = bool(getattr(options, "drop_last_profiler_step", False))
    return kernel_rows(Path(artifact_dir), drop_last_profiler_step=drop)


@hookimpl
def timeline_sources(artifact_dir: Path, options: Any) -> list[TimelineSource]:
    from aorta_torchprof.timeline import sources

    return sources(Path(artifact_dir))
