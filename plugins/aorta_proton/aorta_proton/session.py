"""Start and finish one Proton session from aorta's settings, in the workload's process.

Shared by the ``mode: cli`` runner and the ``mode: env`` payload helper. Imports Triton only when
called and nothing from aorta_core, so it stays usable in any interpreter that has Triton.
"""

from __future__ import annotations

from typing import Any

from aorta_proton import clock_marks

#: Prefix of the launch-hook bookkeeping frames Proton adds (``proton-viewer`` drops them).
METADATA_FRAME = "__proton_launch_metadata"
#: The backends whose ``data=trace`` traces time kernels (the instrumentation backend's trace
#: holds cycles inside kernels): their traces get clock marks.
_TIMED_BACKENDS = (None, "cupti", "roctracer")
#: The profile name of the running trace session whose clock is marked; ``None``: none.
_marked: str | None = None


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
    global _marked
    _marked = name if data == "trace" and backend in _TIMED_BACKENDS else None
    if _marked:
        clock_marks.mark(_marked)


def finalize() -> None:
    """Write every open Proton session to disk (a trace's clock marked first)."""
    import triton.profiler as proton

    global _marked
    if _marked:
        clock_marks.mark(_marked)
        _marked = None
    proton.finalize()
