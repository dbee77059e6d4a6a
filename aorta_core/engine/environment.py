"""Snapshot of the machine a trial ran on, so that runs from different places can be told apart."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

_PACKAGES = ("torch", "triton", "pytorch-triton-rocm", "hydra-core", "polars")


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _query(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _nvidia_gpus() -> list[dict[str, str]]:
    out = _query(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    )
    gpus = []
    for line in (out or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            name, driver, memory = parts
            gpus.append({"vendor": "nvidia", "name": name, "driver": driver, "memory": memory})
    return gpus


def _amd_gpus() -> list[dict[str, str]]:
    out = _query(["rocm-smi", "--showproductname", "--showdriverversion", "--csv"])
    if not out:
        return []
    lines = [ln for ln in out.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split(",")] if lines else []
    gpus = []
    for line in lines[1:]:
        row = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        name = row.get("Card series") or row.get("Card SKU") or row.get("Card model")
        if name:
            gpus.append({"vendor": "amd", "name": name, "driver": row.get("Driver version", "")})
    return gpus


@functools.cache
def snapshot() -> dict[str, Any]:
    """Host, OS, CPU, GPUs and driver, Python and the versions of the packages that matter."""
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": _nvidia_gpus() or _amd_gpus(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": {name: _package_version(name) for name in _PACKAGES},
    }
