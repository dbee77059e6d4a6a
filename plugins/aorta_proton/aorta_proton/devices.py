"""Device-visibility variables for Proton's AMD queue tracers (roctracer, rocprofiler).

Proton refuses to start them while ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES`` is set
("use ROCR_VISIBLE_DEVICES instead"), so aorta moves the selection to ``ROCR_VISIBLE_DEVICES``.
"""

from __future__ import annotations

from collections.abc import Mapping

_HIDDEN = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def intercepts_queues(backend: str, env: Mapping[str, str]) -> bool:
    """True when Proton will run an AMD queue tracer: pinned, or ``auto`` on an AMD host."""
    if backend in ("roctracer", "rocprofiler"):
        return True
    amd = "HIP_VISIBLE_DEVICES" in env or "ROCR_VISIBLE_DEVICES" in env
    return backend == "auto" and amd


def translate(env: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """Move HIP/CUDA device selection to ``ROCR_VISIBLE_DEVICES``; return the env and a note.

    An explicit ``ROCR_VISIBLE_DEVICES`` (even empty) wins; otherwise HIP's value is used before
    CUDA's. An empty value keeps meaning "hide all devices".
    """
    present = [key for key in _HIDDEN if key in env]
    if not present:
        return dict(env), None
    out = {k: v for k, v in env.items() if k not in _HIDDEN}
    if "ROCR_VISIBLE_DEVICES" not in env:
        out["ROCR_VISIBLE_DEVICES"] = env[present[0]]
        source = present[0]
    else:
        source = "the existing ROCR_VISIBLE_DEVICES"
    note = (
        f"proton: unset {', '.join(present)} (Proton's AMD tracers refuse them); "
        f"ROCR_VISIBLE_DEVICES={out['ROCR_VISIBLE_DEVICES']!r} from {source}"
    )
    return out, note
