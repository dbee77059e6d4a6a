"""Real sweeps and benchmark runs shared by the report tests (made once per session)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import need
from reports.report_helpers import H200_JSONL, HATCHET, aorta

from aorta_core.reports.figures import find_browser


def _sweep(root: Path, name: str, *args: str, env: dict | None = None) -> Path:
    out = root / name
    aorta(f"output={out}", *args, cwd=root, env=env)
    assert (out / "matrix.json").is_file(), name
    return out


#: A payload that reports ``step_ms`` = base + trial index through ``$AORTA_METRICS_PATH``, so
#: ``workload_step_ms`` is the same on every machine and under any load.
STEP_MS = ("import json, os; json.dump({{'step_ms': {base} + int(os.environ['AORTA_TRIAL'])}}, "
           "open(os.environ['AORTA_METRICS_PATH'], 'w'))")


@pytest.fixture(scope="session")
def sweeps(tmp_path_factory) -> dict[str, Path]:
    """fast/slow: 5 trials reporting workload_step_ms 10-14 / 40-44 (at 4 the U test's p
    cannot go below 2/70 = 0.029, and the BH q over a cell's 2 metrics below 0.057); broken:
    the same cell failing. Their wall times are real but no test compares them."""
    root = tmp_path_factory.mktemp("sweeps")
    py = sys.executable
    return {
        "fast": _sweep(root, "fast", "sweep=repeat", "trials=5", "--", py, "-c",
                       STEP_MS.format(base=10)),
        "slow": _sweep(root, "slow", "sweep=repeat", "trials=5", "--", py, "-c",
                       STEP_MS.format(base=40)),
        "broken": _sweep(root, "broken", "sweep=repeat", "trials=2", "--", py, "-c",
                         "raise SystemExit(3)"),
    }


@pytest.fixture(scope="session")
def proton_sweep(tmp_path_factory) -> Path:
    """A real Proton collector sweep whose workload drops a real .hatchet into its artifact
    folder (env mode still checks the workload's Triton, so it needs Triton installed; it
    starts no Proton, so it runs past the GPU check on any machine)."""
    need("triton")
    py = sys.executable
    copy = f"import os, shutil; shutil.copy({str(HATCHET)!r}, os.environ['AORTA_PROTON_DIR'])"
    return _sweep(tmp_path_factory.mktemp("sweeps"), "proton", "sweep=repeat", "trials=2",
                  "collector=proton", "collector.proton.mode=env", "--", py, "-c", copy,
                  env={"AORTA_PROTON_PYTHON": py, "AORTA_PROTON_GPU_CHECK": "0"})


@pytest.fixture(scope="session")
def h200_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("h200")
    shutil.copy(H200_JSONL, folder / "rank_00_metrics.jsonl")
    return folder


@pytest.fixture(scope="session")
def cpu_benchmark(tmp_path_factory) -> Path:
    """A real 3-step CPU run of the built-in benchmark (world size 1), on the CPU on any machine."""
    out = tmp_path_factory.mktemp("bench") / "run"
    subprocess.run([sys.executable, "-m", "aorta_core.benchmark", f"output_dir={out}", "device=cpu",
                    "training.max_steps=3"], check=True, capture_output=True, timeout=180)
    return out


@pytest.fixture(scope="session")
def cpu_gloo_run(tmp_path_factory) -> Path:
    """A real 4-step run of the built-in benchmark under 2 gloo ranks on the CPU, telemetry on
    (the default): per-phase fields, but no ``profile.overlap`` (streams exist on GPUs only)."""
    out = tmp_path_factory.mktemp("gloo") / "run"
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", "2", "-m", "aorta_core.benchmark", f"output_dir={out}",
                    "device=cpu", "training.max_steps=4"], check=True, capture_output=True,
                   timeout=300)
    return out


@pytest.fixture(scope="session")
def browser() -> str:
    """Chromium for the real-browser and PNG tests (CI: apt-get install -y chromium)."""
    path = find_browser()
    if path is None:
        pytest.skip("no Chrome/Chromium found (apt-get install -y chromium); browser tests skipped")
    return path
