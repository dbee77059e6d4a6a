"""The benchmark on a GPU host (marker ``gpu``: skipped with the reason elsewhere).

On CUDA it reports what only CUDA events measure; with ``device=cpu`` it stays on the CPU with
gloo although CUDA is available (FSDP2's default mesh would be on ``cuda:0``).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from needs import needs_gpu

from aorta_core.benchmark.schema import decode_line

#: What torch prints when a mesh or barrier picks a GPU the run did not ask for.
IMPLICIT_DEVICE = ("DeviceMesh", "did not set/select the default device",
                   "barrier(): using the device")


def _records(folder: Path, rank: int) -> list[dict]:
    lines = (folder / f"rank_{rank:02d}_metrics.jsonl").read_bytes().splitlines()
    for line in lines:
        decode_line(line)  # schema-valid
    return [orjson.loads(line) for line in lines]


@needs_gpu()
@pytest.mark.parametrize("parallel", ["fsdp", "ddp"])
def test_a_cuda_run_reports_gpu_numbers(tmp_path, benchmark_runner, parallel):
    metrics_path = tmp_path / "metrics" / "workload.json"
    proc = benchmark_runner(["device=cuda", f"parallel={parallel}", "training.max_steps=2",
                             f"output_dir={tmp_path}"],
                            extra_env={"AORTA_METRICS_PATH": str(metrics_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(tmp_path, 0)
    assert [r["global_step"] for r in records] == [0, 1]
    for r in records:
        assert (r["device"], r["profile"]["clock"]) == ("cuda", "cuda_event")
        assert r["compute_ms"] > 0 and r["compute_tflops"] > 0 and "overlap" in r["profile"]
    metrics = orjson.loads(metrics_path.read_bytes())
    assert metrics["world_size"] == 1 and metrics["compute_ms"] > 0
    assert metrics["matmul_tflops"] > 0 and metrics["compute_fraction"] > 0


@needs_gpu()
@pytest.mark.parametrize(("parallel", "nproc"), [("fsdp", 2), ("ddp", 2), ("fsdp", 0)])
def test_a_cpu_run_on_a_gpu_host_stays_on_the_cpu(tmp_path, benchmark_runner, tiny, parallel,
                                                  nproc):
    """Two gloo ranks under torchrun (more ranks than a 1-GPU host has GPUs), and one process
    without torchrun's ``LOCAL_RANK``: every record says cpu, and torch picked no GPU."""
    metrics_path = tmp_path / "metrics" / "workload.json"
    proc = benchmark_runner([*tiny, f"parallel={parallel}", f"output_dir={tmp_path}"],
                            extra_env={"AORTA_METRICS_PATH": str(metrics_path)}, nproc=nproc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [text for text in IMPLICIT_DEVICE if text in proc.stderr], proc.stderr[-3000:]
    world = max(nproc, 1)
    for rank in range(world):
        records = _records(tmp_path, rank)
        assert {(r["device"], r["world_size"], r["profile"]["clock"]) for r in records} == {
            ("cpu", world, "wall")}
    metrics = orjson.loads(metrics_path.read_bytes())
    assert metrics["world_size"] == world and "matmul_tflops" not in metrics


@needs_gpu()
def test_more_ranks_than_gpus_auto_runs_on_the_cpu_and_cuda_is_refused(tmp_path, benchmark_runner,
                                                                         tiny):
    """NCCL refuses two ranks on one GPU: ``auto`` says so once and trains with gloo on the CPU
    (the Profiling Guide's 2-rank command on a 1-GPU host); ``cuda`` is one line with the fix."""
    import torch

    ranks = torch.cuda.device_count() + 1
    tiny_auto = [a for a in tiny if not a.startswith("device=")]
    auto = benchmark_runner([*tiny_auto, f"output_dir={tmp_path / 'auto'}"], nproc=ranks)
    assert auto.returncode == 0, auto.stderr[-3000:]
    assert auto.stderr.count(f"device=auto: {ranks} ranks on this host") == 1
    assert {r["device"] for r in _records(tmp_path / "auto", 0)} == {"cpu"}
    cuda = benchmark_runner(["device=cuda", "training.max_steps=1",
                             f"output_dir={tmp_path / 'cuda'}"], nproc=ranks)
    assert cuda.returncode != 0
    assert (f"aorta benchmark: device=cuda: {ranks} ranks on this host need {ranks} GPUs (one "
            f"each) but torch sees {ranks - 1}; use --nproc_per_node {ranks - 1} or device=cpu"
            in cuda.stderr), cuda.stderr[-3000:]
