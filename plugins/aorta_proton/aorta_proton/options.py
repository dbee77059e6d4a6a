"""The ``collector.proton`` options and their compose-time validation.

Hydra has already checked keys and types against :class:`ProtonOptions`; :func:`check` checks
values and combinations, so that a recipe that would measure nothing fails before any trial runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aorta_core.api import Claim, OptionError
from aorta_proton.session import split_mode

MODES = ("auto", "cli", "env")
BACKENDS = ("auto", "cupti", "roctracer", "rocprofiler", "instrumentation")
#: Backends that intercept AMD's HSA queues, as rocprofv3 does (``auto`` picks one on AMD).
QUEUE_INTERCEPTING_BACKENDS = ("auto", "rocprofiler", "roctracer")
CONTEXTS = ("shadow", "python")
DATA = ("tree", "trace")
HOOKS = ("triton",)
INSTRUMENTATION_MODES = ("default", "mma")
GRANULARITIES = (
    "cta",
    "warp",
    "warp_2",
    "warp_4",
    "warp_8",
    "warp_group",
    "warp_group_2",
    "warp_group_4",
    "warp_group_8",
)
#: ``backend_mode`` names each backend accepts (Proton's ``start()`` docstring, 3.9).
BACKEND_MODES = {
    "cupti": ("pcsampling", "periodic_flushing"),
    "roctracer": ("periodic_flushing",),
    "rocprofiler": ("pcsampling", "periodic_flushing"),
}
FLUSH_FORMATS = ("hatchet", "hatchet_msgpack", "chrome_trace")
#: The largest PC-sampling interval Proton's C++ side reads (a 32-bit int).
_MAX_INTERVAL = 2**31 - 1


@dataclass
class ProtonOptions:
    """Options of ``collector=proton``; every field has its default."""

    #: ``cli``: aorta runs the launch under Proton; ``env``: the payload starts Proton itself;
    #: ``auto``: env for a workload that opens ``aorta_core.payload.session()`` (the built-in
    #: benchmark), cli for any other.
    mode: str = "auto"
    #: ``auto`` lets Proton pick (cupti on NVIDIA, roctracer/rocprofiler on AMD).
    backend: str = "auto"
    context: str = "shadow"
    data: str = "tree"
    #: Proton's ``mode`` for a profiling backend: ``pcsampling[:interval=N]`` or
    #: ``periodic_flushing[:format=F]``.
    backend_mode: str | None = None
    #: Proton's ``mode`` for ``backend: instrumentation``: ``default`` or ``mma``.
    instrumentation_mode: str | None = None
    granularity: str | None = None
    hook: str | None = None


def _one_of(key: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise OptionError(f"collector.proton.{key}: {value!r} is not one of {', '.join(valid)}")


def _check_backend_mode(options: ProtonOptions) -> None:
    spec = options.backend_mode
    if options.instrumentation_mode is not None or options.granularity is not None:
        raise OptionError(
            f"collector.proton.backend_mode={spec!r} conflicts with instrumentation_mode/"
            "granularity: Proton takes one mode; drop one of them"
        )
    if options.backend not in BACKEND_MODES:
        raise OptionError(
            f"collector.proton.backend_mode={spec!r} requires an explicit backend "
            f"(one of {', '.join(BACKEND_MODES)}), not backend={options.backend!r}"
        )
    name, knobs = split_mode(spec)
    valid = BACKEND_MODES[options.backend]
    if name not in valid:
        raise OptionError(
            f"collector.proton.backend_mode: {name!r} is not one of {', '.join(valid)} "
            f"for backend: {options.backend}"
        )
    allowed = {"pcsampling": ("interval",), "periodic_flushing": ("format",)}[name]
    for key, value in knobs.items():
        if key not in allowed:
            raise OptionError(
                f"collector.proton.backend_mode: knob {key!r} is not one of "
                f"{', '.join(allowed)} for {name}"
            )
        if key == "interval" and not (value.isascii() and value.isdigit() and int(value) > 0):
            raise OptionError(
                f"collector.proton.backend_mode: interval={value!r} must be a positive integer"
            )
        if key == "interval" and int(value) > _MAX_INTERVAL:
            raise OptionError(f"collector.proton.backend_mode: interval={value} is more than "
                              f"Proton reads ({_MAX_INTERVAL})")
        if key == "format":
            _one_of("backend_mode format", value, FLUSH_FORMATS)


def check(options: ProtonOptions, selected: Mapping[str, Any]) -> None:
    """Raise :class:`OptionError` for a bad value or a combination that measures nothing."""
    _one_of("mode", options.mode, MODES)
    _one_of("backend", options.backend, BACKENDS)
    _one_of("context", options.context, CONTEXTS)
    _one_of("data", options.data, DATA)
    if options.hook is not None:
        _one_of("hook", options.hook, HOOKS)
    if options.instrumentation_mode is not None:
        _one_of("instrumentation_mode", options.instrumentation_mode, INSTRUMENTATION_MODES)
    if options.granularity is not None:
        _one_of("granularity", options.granularity, GRANULARITIES)
    if options.backend_mode is not None:
        _check_backend_mode(options)
    elif options.backend != "instrumentation" and (
        options.instrumentation_mode is not None or options.granularity is not None
    ):
        raise OptionError(
            "collector.proton.instrumentation_mode/granularity need backend: instrumentation, "
            f"not backend: {options.backend}"
        )
    if options.mode == "cli" and (problem := pinned_tracer_problem(options)):
        raise OptionError(problem)


def pinned_tracer_problem(options: ProtonOptions) -> str | None:
    """Why ``options.backend`` cannot be pinned when aorta runs the launch under Proton (cli)."""
    if options.backend not in ("roctracer", "rocprofiler"):
        return None
    return (f"collector.proton.backend={options.backend!r} cannot be pinned under mode: cli "
            "(Proton starts the queue tracer before the HIP runtime and records an empty ROOT); "
            "use backend: auto, which picks it itself, or mode: env")


def claims(options: ProtonOptions) -> list[Claim]:
    """Proton times the kernels as they run; its queue tracers hold the HSA queues on AMD."""
    held = [Claim("gpu-kernels", why="Proton times the kernels as they run")]
    if options.backend in QUEUE_INTERCEPTING_BACKENDS:
        held.append(Claim("hsa-queues", why=(
            f"backend {options.backend!r} intercepts them (auto resolves to rocprofiler or "
            "roctracer on AMD); set collector.proton.backend=instrumentation to keep proton "
            "beside it")))
    return held


def render_mode(options: ProtonOptions) -> str | None:
    """Proton's single ``mode`` string for these options, or ``None`` when none is set."""
    if options.backend_mode is not None:
        return options.backend_mode
    if options.instrumentation_mode is None and options.granularity is None:
        return None
    mode = options.instrumentation_mode or "default"
    return mode if options.granularity is None else f"{mode}:granularity={options.granularity}"
