"""Real sweeps and benchmark runs shared by the report tests (made once per session)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reports.report_helpers import H200_JSONL, HATCHET, aorta

from aorta_core.reports.figures import find_browser


def _sweep(root: Path, name: str, *args: str, env: dict | None = None) -> Path:
    out = root / name
    aorta(f"output={out}", *args, cwd=root, env=env)
    assert (out / "matrix.json").is_file(), name
    return out


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory) -> dict[str, Path]:
    """fast/slow: 3 trials of sleep 0.05 s / 0.2 s; broken: the same cell failing; proton: a
    real Proton collector sweep whose workload drops a real .hatchet into its artifact folder."""
    root = tmp_path_factory.mktemp("sweeps")
    py = sys.executable
    copy = f"import os, shutil; shutil.copy({str(HATCHET)!r}, os.environ['AORTA_PROTON_DIR'])"
    return {
        "fast": _sweep(root, "fast", "sweep=repeat", "trials=3", "--", py, "-c",
                       "import time; time.sleep(0.05)"),
        "slow": _sweep(root, "slow", "sweep=repeat", "trials=3", "--", py, "-c",
                       "import time; time.sleep(0.2)"),
        "broken": _sweep(root, "broken", "sweep=repeat", "trials=2", "--", py, "-c",
                         "raise SystemExit(3)"),
        "proton": _sweep(root, "proton", "sweep=repeat", "trials=2", "collector=proton",
                         "collector.proton.mode=env", "--", py, "-c", copy,
                         env={"AORTA_PROTON_PYTHON": py}),
    }


@pytest.fixture(scope="session")
def h200_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("h200")
    shutil.copy(H200_JSONL, folder / "rank_00_metrics.jsonl")
    return folder


@pytest.fixture(scope="session")
def cpu_benchmark(tmp_path_factory) -> Path:
    """A real 3-step CPU run of the built-in benchmark (world size 1)."""
    out = tmp_path_factory.mktemp("bench") / "run"
    subprocess.run([sys.executable, "-m", "aorta_core.benchmark", f"output_dir={out}",
                    "training.max_steps=3"], check=True, capture_output=True, timeout=180)
    return out


@pytest.fixture(scope="session")
def browser() -> str:
    """Chromium for the real-browser and PNG tests (CI: apt-get install -y chromium)."""
    path = find_browser()
    if path is None:
        pytest.skip("no Chrome/Chromium found (apt-get install -y chromium); browser tests skipped")
    return path
