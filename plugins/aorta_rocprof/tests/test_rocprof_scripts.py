"""The legacy capture script, run for real: 2 gloo torchrun ranks under the stand-in rocprofv3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
STANDIN = Path(__file__).parent / "standin" / "rocprofv3"


def test_rocprof_capture_runs_the_benchmark_under_rocprofv3(tmp_path: Path):
    config = tmp_path / "bench.yaml"
    config.write_text("training:\n  max_steps: 2\nmodel:\n  num_layers: 1\n")
    bench_out = tmp_path / "bench"
    env = {**os.environ, "ROCPROF_BIN": str(STANDIN), "ROCPROF_OUTPUT_DIR": str(tmp_path / "tr"),
           "NPROC": "2", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "rocprof_capture.sh"), str(config), "data.batch_size=3",
         f"output_dir={bench_out}"], env=env, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "tr").iterdir()
    assert run_dir.name.startswith("run_")
    assert list(run_dir.rglob("*_kernel_trace.csv")), "rocprofv3 wrote no trace"
    lines = (bench_out / "rank_00_metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and (bench_out / "rank_01_metrics.jsonl").exists()
    assert json.loads(lines[0])["world_size"] == 2
    saved = (bench_out / "config.yaml").read_text()
    assert "num_layers: 1" in saved and "batch_size: 3" in saved


def test_rocprof_capture_refuses_a_missing_config(tmp_path: Path):
    done = subprocess.run(["bash", str(REPO / "scripts" / "rocprof_capture.sh"),
                           str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert done.returncode == 1
    assert "not found; give a benchmark config YAML" in done.stderr
