"""Start and finish one Proton session from aorta's settings, in the workload's process.

Shared by the ``mode: cli`` runner and the ``mode: env`` payload helper. Imports Triton only when
called and nothing from aorta_core, so it stays usable in any interpreter that has Triton.
"""

from __future__ import annotations

from typing import Any

#: Prefix of the launch-hook bookkeeping frames Proton adds (``proton-viewer`` drops them).
METADATA_FRAME = "__proton_launch_metadata"


def split_mode(spec: str) -> tuple[str, dict[str, str]]:
    """``"pcsampling:interval=500"`` -> ``("pcsampling", {"interval": "500"})``."""
    name, *knobs = spec.split(":")
    return name, dict(knob.partition("=")[::2] for knob in knobs)


def proton_mode(backend: str | None, spec: str | None) -> Any:
    """Proton's typed mode object for ``spec`` where Proton defines one, else the string.

    Typed objects sidestep Proton's string parsing, which rejects e.g.
    ``default:granularity=warp`` on 3.7 ("Only warp granularity is supported for now").
    """
    if spec is None:
        return None
    from triton.profiler import mode as modes

    name, knobs = split_mode(spec)
    if backend == "instrumentation":
        return {"default": modes.Default, "mma": modes.MMA}[name](**knobs)
    if name == "pcsampling":
        return modes.PCSampling(**{k: int(v) for k, v in knobs.items()})
    return spec


def _ignore_payload_starts() -> None:
    """Make the payload's own ``proton.start()`` calls no-ops, as Proton's CLI does."""
    from triton.profiler import flags

    if hasattr(flags, "flags"):  # Triton >= 3.6: a dataclass instance
        flags.flags.command_line = True
    else:  # Triton 3.5: module-level flag
        flags.set_command_line()


def start(
    name: str,
    *,
    context: str,
    data: str,
    backend: str | None,
    mode: str | None,
    hook: str | None,
    exclusive: bool,
) -> None:
    """Start Proton writing to ``name`` (no extension); ``exclusive`` ignores later starts."""
    import triton.profiler as proton

    proton.start(
        name,
        context=context,
        data=data,
        backend=backend,
        mode=proton_mode(backend, mode),
        hook=hook,
    )
    if exclusive:
        _ignore_payload_starts()


def finalize() -> None:
    """Write every open Proton session to disk."""
    import triton.profiler as proton

    proton.finalize()
