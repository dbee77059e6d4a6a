"""The ``proton`` collector's hook implementations (entry point ``aorta.collectors: proton``).

Importing this module is cheap: Triton, msgspec and subprocesses are reached only inside hooks.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aorta_core.api import (
    Claim,
    CollectorInfo,
    KernelRow,
    Launch,
    PayloadSession,
    SetupError,
    TimelineSource,
    TrialRun,
    files_under,
    hookimpl,
)
from aorta_proton.options import ProtonOptions

#: Profile files Proton writes (``.part_<n>`` phase files included by the globs).
PROFILE_GLOBS = ("*.hatchet", "*.chrome_trace", "*.hatchet_msgpack")


@hookimpl
def aorta_collector() -> CollectorInfo:
    return CollectorInfo(
        description="Triton Proton: GPU time per Python launch site and kernel "
        "(cupti, roctracer, rocprofiler), cycles per intra-kernel scope (instrumentation)",
        options=ProtonOptions,
        config_package="aorta_proton.conf",
        wrap_order=20,
    )


@hookimpl
def check_options(options: ProtonOptions, selected: Mapping[str, Any]) -> None:
    from aorta_proton.options import check

    check(options, selected)


@hookimpl
def check_machine(options: ProtonOptions) -> None:
    """Proton starts only where Triton finds a GPU: a machine without one is refused up front."""
    from aorta_proton.devices import missing_gpu

    problem = missing_gpu(os.environ)
    if problem is not None:
        raise SetupError(
            f"{problem}, and Proton measures only where Triton finds one (every trial would fail "
            "with '0 active drivers'); run on a GPU machine, or send the cells to GPU nodes "
            "(hydra/launcher=aorta_slurm)")


@hookimpl
def payload_session(rank: int, env: Mapping[str, str], context: Mapping[str, Any]
                    ) -> PayloadSession | None:
    from aorta_proton.payload import payload_session as session

    return session(rank, env, context)


@hookimpl
def resource_claims(options: ProtonOptions) -> list[Claim]:
    from aorta_proton.options import claims

    return claims(options)


@hookimpl
def wrap_argv(launch: Launch, options: ProtonOptions, artifact_dir: Path) -> Launch:
    from aorta_proton.wrap import wrap

    return wrap(launch, options, artifact_dir)


@hookimpl
def collect_artifacts(artifact_dir: Path, options: ProtonOptions, run: TrialRun) -> list[Path]:
    """Proton writes straight into the folder; say so when it wrote no profile at all, and make
    a Proton that failed to start in the payload the trial's error (nothing was measured)."""
    from aorta_proton.payload import START_FAILED
    from aorta_proton.wrap import attached_mode, read_note

    files = sorted(p for glob in PROFILE_GLOBS for p in files_under(artifact_dir, glob))
    failed = read_note(artifact_dir, START_FAILED)
    if failed is not None and not files:
        raise SetupError(f"Proton failed to start in the payload ({failed or 'see its stderr'}), "
                         "so nothing was measured")
    if not files and not run.timed_out:
        hint = (
            "did the payload open aorta_core.payload.session() or call "
            "aorta_proton.payload.start()?"
            if attached_mode(options, artifact_dir) == "env"
            else "see the trial's stderr"
        )
        warnings.warn(f"no profile written in {artifact_dir}; {hint}", stacklevel=2)
    return files


@hookimpl
def parse_metrics(artifact_dir: Path, options: ProtonOptions) -> dict[str, Any]:
    from aorta_proton.parse import parse

    return parse(artifact_dir)


@hookimpl
def kernel_table(artifact_dir: Path, options: ProtonOptions) -> list[KernelRow]:
    from aorta_proton.parse import kernel_rows

    return kernel_rows(artifact_dir)


@hookimpl
def timeline_sources(artifact_dir: Path, options: ProtonOptions) -> list[TimelineSource]:
    from aorta_proton.timeline import sources

    return sources(Path(artifact_dir), options)
