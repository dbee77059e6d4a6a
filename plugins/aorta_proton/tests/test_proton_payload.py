"""Proton inside the payload (``mode: env``) through ``aorta_core.payload.session``.

``collector=proton`` with the built-in benchmark takes env mode by itself (``mode: auto``: the
benchmark opens the session). Proton cannot start without a GPU (``0 active drivers``), so with
no GPU (hidden where there is one), past the sweep's own refusal of such a machine, the path is
proven up to that point: the sweep exports the variables, the benchmark's session finds Proton's
hook, rank 0 tries to start it, the workload goes on, and the trial is an error that says why
nothing was measured. On a GPU host (marker ``gpu``) the same sweep profiles the benchmark.
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


def _benchmark(tmp_path, env: dict[str, str]):
    """``collector=proton`` with the built-in benchmark, as typed (no mode given)."""
    out = tmp_path / "o"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.nproc=1",
                      "workload.steps=2", "collector=proton", f"output={out}"], cwd=tmp_path,
                     env={"OMP_NUM_THREADS": "1", **env}, timeout=300)
    return done, out


@needs("triton")
def test_a_proton_that_fails_to_start_in_the_benchmark_is_the_trials_error(tmp_path):
    done, out = _benchmark(tmp_path, {**NO_GPU, "AORTA_PROTON_GPU_CHECK": "0"})
    assert done.returncode == 1, done.stderr[-3000:]
    (record,) = records(out)
    assert record["argv_run"] == record["argv"] and sys.executable in record["argv_run"]
    assert record["env_run"]["AORTA_PROTON_NAME"].endswith("/proton/proton")  # auto: env mode
    assert record["verdict"] == "error" and record["exit_code"] == 0
    assert record["error"].startswith("proton: Proton failed to start in the payload "
                                      "(RuntimeError: 0 active drivers ")
    assert record["error"].endswith("), so nothing was measured")
    assert record["metrics"]["workload_steps"] == 2  # the workload went on without it
    assert "proton" not in record["warnings"]  # not blamed on the payload's session
    stderr = (next(out.glob("cells/*/trial_000")) / record["stderr"]).read_text()
    assert "aorta payload: collector 'proton' session failed at start" in stderr


@needs("triton")
@needs_gpu()
def test_collector_proton_profiles_the_benchmark_as_typed_on_a_gpu(tmp_path):
    done, out = _benchmark(tmp_path, {})
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = records(out)
    assert record["verdict"] == "pass" and record["auto"]["profile"] == "gpu"
    assert "AORTA_PROTON_NAME" in record["env_run"]  # auto: env mode
    stderr = (next(out.glob("cells/*/trial_000")) / record["stderr"]).read_text()
    assert "session failed at start" not in stderr
    assert record["metrics"]["proton_kernel_count"] > 0
