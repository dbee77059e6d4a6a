"""Attach rocprofv3: find the binary and build a deterministic argv around the launch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from aorta_core.api import Launch, SetupError, find_executable
from aorta_rocprof.options import TRACE_FLAGS, RocprofOptions

#: ``-o`` stem: every file lands flat as ``<artifact_dir>/aorta_<name>.csv``.
OUTPUT_STEM = "aorta"
#: ``--summary-output-file`` value; rocprofv3 writes ``<stem>_rocprof_summary.txt``.
SUMMARY_NAME = "rocprof_summary"
BIN_ENV = "ROCPROF_BIN"


def resolve_binary(env: Mapping[str, str]) -> str:
    """``$ROCPROF_BIN`` (a path, or a name looked up on PATH), else ``rocprofv3`` on PATH."""
    return find_executable(
        "rocprofv3", env, env_var=BIN_ENV, install_hint="install ROCm's rocprofiler-sdk",
        example="/opt/rocm/bin/rocprofv3",
    )


def profiler_args(
    options: RocprofOptions, artifact_dir: Path, input_file: Path | None
) -> list[str]:
    """rocprofv3's own arguments (everything before ``--``), in a fixed order."""
    args = ["-d", str(artifact_dir), "-o", OUTPUT_STEM, "--output-format", options.output_format]
    args += [TRACE_FLAGS[d] for d in dict.fromkeys(options.trace)]
    if options.stats:
        args.append("--stats")
    args += ["-S", "--summary-output-file", SUMMARY_NAME]
    if options.summary_units is not None:
        args += ["-u", options.summary_units]
    if options.kernel_include_regex is not None:
        args += ["--kernel-include-regex", options.kernel_include_regex]
    if input_file is not None:
        args += ["-i", str(input_file)]
    if options.pmc:
        args += ["--pmc", *options.pmc]
    return args


def _input_path(options: RocprofOptions, cwd: Path) -> Path | None:
    if options.input_file is None:
        return None
    path = (cwd / os.path.expanduser(options.input_file)).resolve()
    if not path.is_file():
        raise SetupError(
            f"collector.rocprof.input_file={options.input_file} does not exist (looked in {cwd}); "
            "give an existing rocprofv3 input file"
        )
    return path


def wrap(launch: Launch, options: RocprofOptions, artifact_dir: Path) -> Launch:
    """``<rocprofv3> <args> -- <argv>``; ``--`` always, since rocprofv3 bools take a value."""
    if not launch.argv:
        raise SetupError("the launch has no command to run under rocprofv3; give one after --")
    binary = resolve_binary(launch.env)
    args = profiler_args(options, artifact_dir, _input_path(options, launch.cwd))
    return replace(launch, argv=(binary, *args, "--", *launch.argv))
