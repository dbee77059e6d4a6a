"""Helpers of the report tests: paths of the fixtures, the real ``aorta`` CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
#: Real 2-rank traces whose Kineto clock ran 4.98x the wall clock (PROVENANCE.md).
CLOCK_5X = FIXTURES / "kineto_clock_5x"
H200_JSONL = REPO / "bench/gpu_evidence/h200-2026-12-02/benchmark/telemetry_run.jsonl"
HATCHET = REPO / "plugins/aorta_proton/tests/fixtures/tritonbench_softmax_h100.hatchet"


def aorta(*args: str, cwd: Path, env: dict | None = None, check: bool = True):
    done = subprocess.run([sys.executable, "-m", "aorta_core", *args], cwd=cwd,
                          env={**os.environ, "AORTA_REPORT_PNG": "0", **(env or {})},
                          capture_output=True, text=True, timeout=180)
    if check and done.returncode not in (0, 1):
        raise AssertionError(f"aorta {args} -> {done.returncode}\n{done.stderr}")
    return done
