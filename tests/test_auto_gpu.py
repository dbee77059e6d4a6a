"""``auto`` on a GPU host, through the real CLI (marker ``gpu``: skipped with the reason elsewhere).

The machine's side comes from torch (what a workload launched from here sees), so the same
tests hold on one H200 and on eight. The no-GPU side is in tests/test_first_contact.py, with the
GPUs hidden there.
"""

from __future__ import annotations

from pathlib import Path

from cli_helpers import records, run_aorta
from needs import needs_gpu

from aorta_core.engine.machine import visible_gpus


@needs_gpu()
def test_auto_on_a_gpu_host_takes_the_gpu_profile_and_records_it(tmp_path: Path):
    """One rank per visible GPU on CUDA; sequence length given to keep the base model short."""
    gpus = visible_gpus()
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.steps=2",
                      "workload.sequence_length=128", f"output={out}"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (rec,) = records(out)
    assert rec["verdict"] == "pass"
    assert rec["auto"]["profile"] == "gpu" and rec["auto"]["machine"] == gpus.describe()
    chosen = rec["auto"]["chosen"]
    assert (chosen["workload.device"], chosen["workload.nproc"]) == ("cuda", gpus.count)
    assert (chosen["workload.model"], chosen["workload.precision"]) == ("base", "bf16")
    assert "workload.sequence_length" not in chosen  # given, not chosen
    assert f"--nproc_per_node={gpus.count}" in rec["argv"] and "device=cuda" in rec["argv"]
    assert rec["metrics"]["workload_world_size"] == gpus.count
    assert rec["metrics"]["workload_compute_tflops"] > 0  # timed with CUDA events
    words = " ".join(done.stderr.split())  # the summary may wrap at the terminal's width
    assert (f"auto ({gpus.describe()}): workload.device=cuda workload.nproc={gpus.count}"
            in words)


@needs_gpu()
def test_more_ranks_than_visible_gpus_are_refused_before_launch(tmp_path: Path):
    gpus = visible_gpus()
    ranks = gpus.count + 1
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", f"workload.nproc={ranks}",
                      f"output={out}"], cwd=tmp_path)
    assert done.returncode == 1
    message = (f"workload.nproc={ranks} needs {ranks} GPUs (one per rank) but this machine shows "
               f"{gpus.describe()}; use workload.nproc=auto ({gpus.count}), or "
               "workload.device=cpu for gloo ranks on the CPU")
    (line,) = [line for line in done.stderr.splitlines() if message in line]
    assert line.endswith(message)
    assert records(out) == []
