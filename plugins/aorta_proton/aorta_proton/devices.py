"""The GPUs Proton needs: whether this machine shows one at all, and the device-visibility
variables of its AMD queue tracers (roctracer, rocprofiler).

Proton starts only where Triton has an active GPU driver (else ``RuntimeError: 0 active
drivers``). Whether the machine has a GPU is read from its device files, cheaply and the same for
every interpreter: no driver is loaded, no GPU context made.

Proton refuses to start the AMD tracers while ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES``
is set ("use ROCR_VISIBLE_DEVICES instead"), so aorta moves the selection to
``ROCR_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Mapping

_HIDDEN = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
#: Device files of GPUs Triton drives, each with the variables that can hide them all: NVIDIA's
#: (and WSL2's GPU, ``/dev/dxg``), and AMD's kernel driver (HIP also reads CUDA's variable).
_GPUS = ((("/dev/nvidia[0-9]*", "/dev/dxg"), ("CUDA_VISIBLE_DEVICES",)),
         (("/dev/kfd",), ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")))
#: Set to 0 where a GPU is reached in a way the device files do not show: no check then.
CHECK_ENV = "AORTA_PROTON_GPU_CHECK"


def _hides_all(value: str) -> bool:
    """An empty list, or one that starts with an invalid index (``-1``): no device is visible."""
    first = value.split(",")[0].strip()
    return not first or first.startswith("-")


def missing_gpu(env: Mapping[str, str]) -> str | None:
    """Why no GPU is visible to a process started with ``env`` on this machine, or ``None``
    when one may be (or device files cannot tell: not Linux, or :data:`CHECK_ENV` is 0)."""
    if not sys.platform.startswith("linux") or env.get(CHECK_ENV, "").strip() == "0":
        return None
    hidden = []
    for patterns, variables in _GPUS:
        if not any(glob.glob(pattern) for pattern in patterns):
            continue
        hiding = [f"{v}={env[v]!r}" for v in variables if v in env and _hides_all(env[v])]
        if not hiding:
            return None
        hidden += [h for h in hiding if h not in hidden]
    if hidden:
        return f"{' and '.join(hidden)} hides every GPU"
    return "there is no GPU (no /dev/nvidia*, /dev/kfd or /dev/dxg)"


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
