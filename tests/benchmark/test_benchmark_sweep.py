"""End to end through the real core CLI: the benchmark as workload, collectors inside it."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_helpers import records, run_aorta


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
    assert list((trial / "torchprof").glob("rank0.step*.pt.trace.json"))
    assert (trial / "benchmark" / "rank_00_metrics.jsonl").is_file()


#: An outside collector: its wrap_argv selects it for the trial, its payload session counts
#: the steps of every rank.
STEPS_PLUGIN = '''
import dataclasses
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    pass

@hookimpl
def aorta_collector():
    return CollectorInfo(description="counts the workload's steps from inside", options=Options,
                         config_package=__package__ + ".conf", wrap_order=90)

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return dataclasses.replace(launch, env={**launch.env, "AORTA_STEPS_DIR": str(artifact_dir)})

@hookimpl
def parse_metrics(artifact_dir, options):
    files = sorted(artifact_dir.glob("rank*.txt"))
    return {"steps_ranks": len(files),
            "steps_total": sum(f.read_text().count("step\\n") for f in files)}
'''
STEPS_PAYLOAD = '''
from pathlib import Path

class Counter:
    def __init__(self, path, output_dir):
        self.path, self.output_dir = path, output_dir

    def write(self, line):
        with self.path.open("a") as handle:
            handle.write(line + "\\n")

    def start(self):
        self.write(f"start {self.output_dir}")

    def step(self):
        self.write("step")

    def stop(self):
        self.write("stop")

@hookimpl
def payload_session(rank, env, context):
    folder = env.get("AORTA_STEPS_DIR")
    return Counter(Path(folder) / f"rank{rank}.txt", context["output_dir"]) if folder else None
'''


def test_an_outside_collector_s_session_runs_in_every_rank_of_the_benchmark(tmp_path,
                                                                              plugin_site):
    """The CPU profile's 2 gloo ranks (``workload.device=cpu``: a GPU host's too)."""
    plugin_site.add("steps", STEPS_PLUGIN, payload=STEPS_PAYLOAD)
    out = tmp_path / "sweep"
    proc = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.steps=3",
                      "workload.device=cpu", "collector=steps", f"output={out}"], cwd=tmp_path,
                     env={**plugin_site.env, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(out)
    assert record["metrics"]["workload_world_size"] == 2
    assert (record["metrics"]["steps_ranks"], record["metrics"]["steps_total"]) == (2, 6)
    trial = next((out / "cells").glob("*/trial_000"))
    for rank in (0, 1):
        assert (trial / "steps" / f"rank{rank}.txt").read_text().splitlines() == [
            f"start {trial / 'benchmark'}", "step", "step", "step", "stop"]
