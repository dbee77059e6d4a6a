"""Shared helpers: run the real benchmark in subprocesses (torchrun gloo on CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
TINY = ["device=cpu", "training.max_steps=3", "data.batch_size=2", "data.sequence_length=4"]


def run_benchmark(argv: list[str], extra_env: dict[str, str] | None = None, nproc: int = 0,
                  cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m aorta_core.benchmark`` (nproc 0) or ``torchrun --nproc_per_node nproc -m``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
    env.update({"OMP_NUM_THREADS": "1", **(extra_env or {})})
    if nproc:
        cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m", "aorta_core.benchmark"]
    else:
        cmd = [sys.executable, "-m", "aorta_core.benchmark"]
    return subprocess.run(cmd + argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="session")
def benchmark_runner():
    """The runner, for tests (fixtures cannot be imported under --import-mode=importlib)."""
    return run_benchmark


@pytest.fixture(scope="session")
def tiny():
    """Overrides that keep a CPU run to a few seconds."""
    return list(TINY)
