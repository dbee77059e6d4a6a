"""torchprof inside the payload: its ``payload_session`` hook and real loops using it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import torch
from aorta_torchprof import plugin
from aorta_torchprof import session as tp
from aorta_torchprof.options import TorchprofOptions
from cli_helpers import records, run_aorta
from needs import NO_GPU
from omegaconf import OmegaConf

from aorta_core.benchmark.config import DECIDED_BY_BENCHMARK, compose_config
from aorta_core.benchmark.profiling import torch_profiler_request

REPO = Path(__file__).resolve().parents[3]
LOOP = REPO / "examples" / "payload" / "train.py"


def test_the_sweep_s_env_mode_wins_over_the_workload_s_request(tmp_path):
    env = {tp.DIR_ENV: str(tmp_path / "env"), tp.OPTIONS_ENV: json.dumps({"active": 7})}
    request = {"active": 2, "dir": str(tmp_path / "own"), "unknown": 1}
    chosen = plugin.payload_session(
        rank=3, env=env, context={"torch_profiler": request, "output_dir": tmp_path})
    assert (chosen.options.active, chosen.out_dir, chosen.rank) == (7, tmp_path / "env", 3)
    own = plugin.payload_session(rank=0, env={}, context={"torch_profiler": request})
    assert (own.options.active, own.out_dir) == (2, tmp_path / "own")
    assert plugin.payload_session(rank=0, env={}, context={"output_dir": tmp_path}) is None
    assert plugin.payload_session(rank=0, env={}, context={"torch_profiler": None}) is None


def test_under_the_runner_the_workload_s_steps_reach_its_session(tmp_path):
    runner = tp.Session(TorchprofOptions(step_on="manual", wait=0, warmup=1, active=1),
                        tmp_path, 0)
    runner.start()
    try:
        attached = plugin.payload_session(rank=0, env={tp.DIR_ENV: str(tmp_path)}, context={})
        attached.start()
        for _ in range(2):
            torch.ones(4).sum()
            attached.step()
        attached.stop()
        assert runner.steps == 2
    finally:
        runner.stop()
    assert [p.name for p in tmp_path.iterdir()] == ["rank0.step2.pt.trace.json"]


def test_the_benchmark_s_profiling_block_is_torchprof_s_options(tmp_path):
    """Composed with torchprof installed, the block holds each of its options the benchmark does
    not decide (read from TorchprofOptions, not copied), and its request is what
    TorchprofOptions takes."""
    block = compose_config(["profiling.enabled=true", "profiling.with_flops=true"]).profiling
    options = {f.name for f in fields(TorchprofOptions)}
    assert set(block) - {"enabled", "rocm_trace_export", "trace_dir"} == (
        options - set(DECIDED_BY_BENCHMARK))
    request = torch_profiler_request(OmegaConf.to_container(block), tmp_path, 0,
                                     torch.device("cpu"))
    assert set(request) - {"dir"} <= options
    assert (request["with_flops"], request["active"], request["step_on"]) == (True, 2, "manual")


def test_a_user_loop_with_the_two_lines_is_profiled_on_its_own_steps(tmp_path):
    """On the CPU (GPUs hidden: the loop takes one where it sees it), so its metrics are the
    CPU operator ones."""
    out = tmp_path / "sweep"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "collector=torchprof",
                      "collector.torchprof.mode=env", "collector.torchprof.step_on=manual",
                      "--", sys.executable, str(LOOP), "--steps", "6", "--width", "16"],
                     cwd=tmp_path, env={"OMP_NUM_THREADS": "1", **NO_GPU}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = records(out)
    trial = next(out.glob("cells/*/trial_000"))
    assert [p.name for p in (trial / "torchprof").iterdir()] == ["rank0.step5.pt.trace.json"]
    assert record["metrics"]["torchprof_cpu_op_count"] > 0
    assert "collectors inside: ['torchprof']" in (trial / record["stdout"]).read_text()


def test_the_loop_outside_a_sweep_runs_unmeasured(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
    done = subprocess.run([sys.executable, str(LOOP), "--steps", "2", "--width", "8"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "collectors inside: []" in done.stdout
    assert list(tmp_path.iterdir()) == []
