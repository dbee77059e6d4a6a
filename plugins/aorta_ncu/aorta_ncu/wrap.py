"""Attach ncu: find the binary, check the host, build a deterministic argv around the launch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from aorta_core.api import Launch, SetupError, find_executable
from aorta_ncu.counters import REQUESTED
from aorta_ncu.host import check_host
from aorta_ncu.options import NcuOptions

BIN_ENV = "NCU_BIN"
#: ``-o`` value: ncu appends ``.ncu-rep``.
REPORT_STEM = "report"


def resolve_binary(options: NcuOptions, env: Mapping[str, str]) -> str:
    """``collector.ncu.ncu_bin``, else ``$NCU_BIN``, else ``ncu`` on the trial's PATH."""
    return find_executable(
        "ncu", env, env_var=BIN_ENV, install_hint="install Nsight Compute (CUDA toolkit)",
        example="/usr/local/cuda/bin/ncu", option_key="collector.ncu.ncu_bin",
        option_value=options.ncu_bin,
    )


def profiler_args(options: NcuOptions, artifact_dir: Path) -> list[str]:
    """ncu's own arguments (everything before ``--``), in a fixed order."""
    args = ["--target-processes", options.target_processes, "-f",
            "-o", str(artifact_dir / REPORT_STEM)]
    if isinstance(options.set, str):
        args += ["--set", options.set]
    else:
        for section in dict.fromkeys(options.set):
            args += ["--section", section]
    args += ["--metrics", ",".join(dict.fromkeys([*REQUESTED, *options.metrics]))]
    if options.kernel_regex is not None:
        args += ["-k", f"regex:{options.kernel_regex}"]
    if options.launch_skip:
        args += ["--launch-skip", str(options.launch_skip)]
    if options.launch_count is not None:
        args += ["--launch-count", str(options.launch_count)]
    args += ["--replay-mode", options.replay_mode, "--clock-control", options.clock_control,
             "--cache-control", options.cache_control]
    return args


def wrap(launch: Launch, options: NcuOptions, artifact_dir: Path) -> Launch:
    """``<ncu> <args> -- <argv>``, or a setup error when ncu could not profile here."""
    if not launch.argv:
        raise SetupError("the launch has no command to run under ncu; give one after --")
    binary = resolve_binary(options, launch.env)
    if options.host_check:
        check_host()
    return replace(launch, argv=(binary, *profiler_args(options, artifact_dir), "--", *launch.argv))
