"""Refuse a trial up front when ncu could not profile on this host (Linux driver files).

Without these checks ncu still runs the command, profiles nothing and says so only in its
console output; a setup error with the fix is cheaper to read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aorta_core.api import SetupError

NVIDIACTL = Path("/dev/nvidiactl")
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")
PROCESS_STATUS = Path("/proc/self/status")
CAP_SYS_ADMIN = 21
PERMISSION_FIX = (
    "run as root (or with CAP_SYS_ADMIN), or let every user profile: "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reload the "
    "driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


def _admin_only(params: Path) -> bool:
    """``RmProfilingAdminOnly: 1`` in the driver's parameters (absent file: not restricted)."""
    try:
        text = params.read_text(errors="replace")
    except OSError:
        return False
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return any(k.strip() == "RmProfilingAdminOnly" and v.strip() == "1" for k, v in pairs)


def _is_admin(status: Path) -> bool:
    """CAP_SYS_ADMIN in our effective capabilities (root in a container may lack it)."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split(":", 1)[1].strip(), 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


def check_host(
    nvidiactl: Path = NVIDIACTL, params: Path = DRIVER_PARAMS, status: Path = PROCESS_STATUS
) -> None:
    """Raise ``SetupError`` when there is no NVIDIA driver or no permission for its counters."""
    if not sys.platform.startswith("linux"):
        return
    if not nvidiactl.exists():
        raise SetupError(
            f"no NVIDIA GPU driver on this machine ({nvidiactl} is missing) and ncu profiles only "
            "NVIDIA GPUs; run on a machine with an NVIDIA GPU and driver, or pick another collector"
        )
    if _admin_only(params) and not _is_admin(status):
        raise SetupError(
            "ERR_NVGPUCTRPERM: the NVIDIA driver lets only admin users read GPU performance "
            f"counters (RmProfilingAdminOnly: 1 in {params}); {PERMISSION_FIX}"
        )
