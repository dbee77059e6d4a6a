"""The GPU proof and the examples are at least well-formed, and their checkers really fail."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[1]
EXAMPLES = PLUGIN.parents[1] / "examples" / "profiling" / "proton"
SCRIPTS = sorted([*PLUGIN.joinpath("gpu_proof").glob("*"), *EXAMPLES.rglob("*")])


@pytest.mark.parametrize("path", [p for p in SCRIPTS if p.suffix in (".py", ".sh")], ids=str)
def test_script_is_well_formed(path):
    if path.suffix == ".py":
        py_compile.compile(str(path), doraise=True)
    else:
        subprocess.run(["bash", "-n", str(path)], check=True)


def test_checkers_fail_on_a_sweep_without_gpu_metrics(tmp_path):
    payload = tmp_path / "cpu.py"
    payload.write_text("print('cpu only')\n")
    output = tmp_path / "sweep"
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "aorta_core",
            "sweep=repeat",
            "collector=proton",
            "trials=1",
            f"output={output}",
            "collector.proton.mode=env",
            "--",
            sys.executable,
            str(payload),
        ],
        cwd=tmp_path,
        env={**os.environ, "AORTA_PROTON_GPU_CHECK": "0"},  # a sweep on any machine
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert (output / "matrix.json").is_file(), sweep.stdout + sweep.stderr
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "check_matrix.py"), str(output), "proton_gpu_time_ms"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "proton_gpu_time_ms missing" in done.stdout and done.stdout.startswith("FAIL")
    proof = subprocess.run(
        [sys.executable, str(PLUGIN / "gpu_proof" / "check_proof.py"), str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proof.returncode == 1 and "check(s) failed" in proof.stdout
