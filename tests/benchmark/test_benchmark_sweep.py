"""End to end through the real core CLI: the benchmark as workload, torchprof in env mode."""

from __future__ import annotations

import json
import subprocess
import sys


def test_sweep_puts_benchmark_and_torchprof_metrics_in_the_matrix(tmp_path, tiny):
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=1", f"output={out}",
           "collector=torchprof", "collector.torchprof.mode=env", "--",
           sys.executable, "-m", "aorta_core.benchmark", *tiny]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cell,) = json.loads((out / "matrix.json").read_text())["cells"]
    summary = cell["metrics_summary"]
    assert summary["workload_steps"]["mean"] == 3
    assert summary["workload_step_time_ms"]["mean"] > 0
    assert summary["torchprof_trace_count"]["mean"] >= 1
    assert "workload_overlap_ratio" not in summary  # CPU: not measured, so not invented
    trial = next((out / "cells").glob("*/trial_000"))
    assert list((trial / "torchprof").rglob("rank0_step*.pt.trace.json"))
    assert (trial / "benchmark" / "rank_00_metrics.jsonl").is_file()
