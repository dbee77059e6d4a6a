"""Proton inside the payload (``mode: env``) through ``aorta_core.payload.session``.

Proton cannot start without a GPU (``0 active drivers``), so with no GPU (hidden where there is
one) the path is proven up to that point: the sweep exports the variables, the benchmark's
session finds Proton's hook, rank 0 tries to start it, the failure is one warning and the
trial still passes. On a GPU host (marker ``gpu``) the same sweep profiles the benchmark.
"""

from __future__ import annotations

import sys

from aorta_proton.payload import _Session
from aorta_proton.plugin import payload_session
from cli_helpers import records, run_aorta
from needs import NO_GPU, needs, needs_gpu

ENV = {"AORTA_PROTON_DIR": "/t/proton", "AORTA_PROTON_NAME": "/t/proton/proton"}


def test_rank_0_of_an_env_mode_trial_gets_the_session():
    assert isinstance(payload_session(rank=0, env=ENV, context={}), _Session)
    assert payload_session(rank=1, env=ENV, context={}) is None
    assert payload_session(rank=0, env={}, context={}) is None
    assert payload_session(rank=0, env={"AORTA_PROTON_DIR": "/t"},
                           context={"output_dir": "/o"}) is None


def _env_mode_benchmark(tmp_path, env: dict[str, str]):
    out = tmp_path / "o"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.nproc=1",
                      "workload.steps=2", "collector=proton", "collector.proton.mode=env",
                      f"output={out}"], cwd=tmp_path, env={"OMP_NUM_THREADS": "1", **env},
                     timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@needs("triton")
def test_benchmark_in_env_mode_tries_proton_and_goes_on(tmp_path):
    out = _env_mode_benchmark(tmp_path, NO_GPU)
    (record,) = records(out)
    assert record["verdict"] == "pass"
    assert record["metrics"]["workload_steps"] == 2
    stderr = (next(out.glob("cells/*/trial_000")) / record["stderr"]).read_text()
    assert "aorta payload: collector 'proton' session failed at start" in stderr
    assert any("aorta_core.payload.session" in w for w in record["warnings"]["proton"])
    assert sys.executable in record["argv_run"]


@needs("triton")
@needs_gpu()
def test_benchmark_in_env_mode_on_a_gpu_is_profiled_by_proton(tmp_path):
    out = _env_mode_benchmark(tmp_path, {})
    (record,) = records(out)
    assert record["verdict"] == "pass" and record["auto"]["profile"] == "gpu"
    stderr = (next(out.glob("cells/*/trial_000")) / record["stderr"]).read_text()
    assert "session failed at start" not in stderr
    assert record["metrics"]["proton_kernel_count"] > 0
