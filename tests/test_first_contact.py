"""What a new user meets first, through the real CLI: exit statuses, the real reason of a failure,
one-line mistakes, Ctrl-C, file modes, and ``auto`` defaults that fit the machine."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta
from needs import NO_GPU
from omegaconf import OmegaConf

from aorta_core.engine.auto import AutoError, resolve
from aorta_core.engine.failure import reason
from aorta_core.engine.machine import Gpus

FIXTURES = Path(__file__).parent / "fixtures" / "stderr"
RANK1_RAISES = FIXTURES / "torchrun_gloo_rank1_raises.py"
RANK0_ABORTS = FIXTURES / "torchrun_gloo_rank0_aborts.py"


# -- exit status --------------------------------------------------------------------------------

def test_exit_status_is_0_when_all_pass_1_when_any_fails_unless_allowed(tmp_path: Path):
    out = tmp_path / "out"
    ok = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    mixed = run_aorta(["-m", "sweep=repeat", "trials=1", f"output={tmp_path / 'mixed'}",
                       "+env.CODE=0,3", "--", "sh", "-c", "exit $CODE"], cwd=tmp_path)
    assert mixed.returncode == 1, mixed.stderr
    assert sorted(r["verdict"] for r in records(tmp_path / "mixed")) == ["fail", "pass"]
    allowed = run_aorta(["sweep=repeat", "trials=1", "allow_failures=true",
                         f"output={tmp_path / 'allowed'}", "--", "false"], cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert [r["verdict"] for r in records(tmp_path / "allowed")] == ["fail"]


def test_a_refused_cell_makes_the_sweep_exit_1(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "command=null", f"output={tmp_path / 'out'}"], cwd=tmp_path)
    assert done.returncode == 1
    assert "no command to run" in done.stderr


# -- the real reason of a failure ---------------------------------------------------------------

def _torchrun_trial(tmp_path: Path, script: Path):
    """A one-trial sweep of ``script`` under 2-rank torchrun: the CLI's result and the record."""
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", sys.executable, "-m",
                      "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                      str(script)], cwd=tmp_path, timeout=180)
    assert done.returncode == 1, done.stderr
    (rec,) = records(out)
    return done, rec


def test_reason_is_the_failing_ranks_exception_through_torchrun(tmp_path: Path):
    done, rec = _torchrun_trial(tmp_path, RANK1_RAISES)
    assert rec["error"] == ("exit code 1: rank 1: RuntimeError: Duplicate GPU detected : rank 1 "
                            "and rank 0 both on CUDA device 60")
    assert rec["error"] in done.stderr


def test_reason_of_a_rank_that_crashes_natively_is_its_signal(tmp_path: Path):
    """Rank 0 aborts; rank 1's traceback only says a peer went away: the root cause is named."""
    captured = (FIXTURES / "torchrun_gloo_rank0_aborts.stderr").read_text()
    assert "[rank1]: RuntimeError: " in captured and "Connection reset by peer" in captured
    assert reason(captured) == "rank 0: killed by SIGABRT"
    _, rec = _torchrun_trial(tmp_path, RANK0_ABORTS)
    assert rec["error"] == "exit code 1: rank 0: killed by SIGABRT"


def test_a_rank_that_aborts_in_cpp_teardown_says_what_the_runtime_said():
    """A real 2-rank gloo run (examples/diagnose/train_profiled.py before it skipped teardown)
    whose rank 0 aborted at exit after its work: libstdc++'s line is the cause."""
    captured = (FIXTURES / "torchrun_gloo_teardown_abort.stderr").read_text()
    assert reason(captured) == ("rank 0: killed by SIGABRT (terminate called without an active "
                                "exception)")


NATIVE_CRASHES = {
    "throw.cpp": ("#include <stdexcept>\n#include <thread>\nint main() { std::thread t([] { "
                  "throw std::runtime_error(\"CUDA error: an illegal memory access\"); }); "
                  "t.join(); }\n",
                  "killed by SIGABRT: std::runtime_error: CUDA error: an illegal memory access"),
    "double_free.c": ("#include <stdlib.h>\nint main(void) { char *p = malloc(32); free(p); "
                      "free(p); return 0; }\n", "killed by SIGABRT: free(): double free"),
}


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("g++")),
                    reason="needs a C and a C++ compiler (gcc, g++) to build the crashing "
                           "programs")
@pytest.mark.parametrize("source", sorted(NATIVE_CRASHES))
def test_a_native_crash_is_named_by_what_the_runtime_said(tmp_path: Path, source: str):
    code, expected = NATIVE_CRASHES[source]
    (tmp_path / source).write_text(code)
    program = tmp_path / "crash"
    compiler = "g++" if source.endswith(".cpp") else "gcc"
    subprocess.run([compiler, "-pthread", str(tmp_path / source), "-o", str(program)],
                   check=True)
    out = tmp_path / "out"
    run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", str(program)], cwd=tmp_path)
    (rec,) = records(out)
    assert rec["error"].startswith(expected), rec["error"]


def test_reason_skips_rulers_summaries_warnings_and_log_lines():
    captured = (FIXTURES / "torchrun_gloo_rank1_raises.stderr").read_text()
    assert captured.rstrip().endswith("=" * 60)  # what the old "last line" showed
    assert reason(captured) == ("rank 1: RuntimeError: Duplicate GPU detected : rank 1 and rank 0 "
                                "both on CUDA device 60")


def test_reason_through_interleaved_nccl_tracebacks_is_the_last_error_line():
    captured = (FIXTURES / "torchrun_nccl_two_ranks_one_gpu.stderr").read_text()
    assert reason(captured) == ("torch.distributed.DistBackendError: Duplicate GPU detected : "
                                "rank 0 and rank 1 both on CUDA device 60")


@pytest.mark.parametrize(("script", "expected"), [
    ("def f():\n try:\n  {}['k']\n except KeyError as e:\n  raise ValueError('bad') from e\nf()",
     "ValueError: bad"),
    ("import sys\nsys.exit('fatal: cannot open data.bin')", "fatal: cannot open data.bin"),
    ("import sys, warnings\nwarnings.warn('late')\nprint('=' * 40, file=sys.stderr)\n"
     "sys.exit(2)", None),
])
def test_reason_of_real_python_failures(tmp_path: Path, script: str, expected: str | None):
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0
    assert reason(done.stderr) == expected


def test_reason_skips_the_profilers_log_lines_after_the_error():
    """torch.profiler stopped after the workload's error line (a profiler session stops in a
    ``finally``) prints Kineto's own log lines after it; the workload's line is the reason."""
    script = ("import sys, torch\nfrom torch.profiler import profile, schedule\n"
              "p = profile(schedule=schedule(wait=1, warmup=1, active=1))\np.start()\n"
              "torch.ones(4).sum()\np.step()\n"
              "print('bad config: steps=-1', file=sys.stderr)\np.stop()\nsys.exit(2)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert reason(done.stderr) == "bad config: steps=-1"
    if "profiler_stop" not in done.stderr.splitlines()[-1]:  # Kineto's line must come last
        pytest.skip("this torch printed no Kineto log line as its profiler stopped (torch 2.13 "
                    "on the CPU does; 2.11 with CUDA on the H100 did not)")


def test_a_signal_is_named(tmp_path: Path):
    out = tmp_path / "out"
    run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "sh", "-c", "kill -9 $$"],
              cwd=tmp_path)
    (rec,) = records(out)
    assert rec["error"] == "killed by SIGKILL"


# -- mistakes: one line, exit 2, nothing written ------------------------------------------------

def _one_error_line(done) -> str:
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("aorta: error: ")
    return line.removeprefix("aorta: error: ")


def test_a_command_without_dashes_is_named(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "output=x", "python", "train.py"], cwd=tmp_path)
    assert _one_error_line(done) == (
        "'python' is not an override (key=value): put the workload command after `--`, e.g. "
        "python -m aorta_core sweep=repeat output=x -- python train.py")
    assert not (tmp_path / "x").exists()


def test_repeat_without_a_command_is_refused(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "output=x"], cwd=tmp_path)
    assert "sweep=repeat runs the command after `--`, and none was given" in _one_error_line(done)
    assert not (tmp_path / "x").exists()
    named = run_aorta(["sweep=repeat", "workload=tiny", "trials=1", "workload.steps=2",
                       "output=y"], cwd=tmp_path)
    assert named.returncode == 0, named.stderr


def test_unknown_collector_key_is_refused_at_compose(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "collector=torchprof", "+collector.torchprof.wiat=1",
                      "output=x", "--", "true"], cwd=tmp_path)
    line = _one_error_line(done)
    assert line.startswith("collector.torchprof.wiat is not an option of torchprof; valid: ")
    assert "wait" in line and not (tmp_path / "x").exists()


@pytest.mark.parametrize(("signum", "status", "how"), [
    (signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_ctrl_c_or_sigterm_is_one_line_and_the_rerun_resumes(tmp_path: Path, signum, status,
                                                             how):
    out = tmp_path / "out"
    args = [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=4", f"output={out}",
            "--", "sh", "-c", "sleep 1.5"]
    env = {**os.environ, "AORTA_REPORT_PNG": "0"}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(records(out)) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status
    kept = len(records(out))
    assert 1 <= kept < 4
    assert err.strip().splitlines()[-1] == (
        f"aorta: error: {how}: {kept} trials recorded in {out}; run the same command again to "
        f"resume (from another folder: add {shlex.quote(f'output={out}')})")
    assert "Traceback" not in err
    assert (out / ".aorta.lock").read_bytes() == b""  # released: no pid left behind
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0, again.stderr
    assert f"({kept}/4 trials already recorded)" in again.stderr
    assert sorted(r["trial"] for r in records(out)) == [0, 1, 2, 3]


# -- files honour the umask ---------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_written_files_honour_the_umask(tmp_path: Path, umask: int):
    out = tmp_path / "out"
    done = subprocess.run(
        ["sh", "-c", f'umask {umask:03o}; exec "$@"', "sh", sys.executable, "-m", "aorta_core",
         "sweep=repeat", "trials=1", f"output={out}", "--", "true"],
        cwd=tmp_path, env={**os.environ, "AORTA_REPORT_PNG": "0"}, capture_output=True,
        text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    cell = next((out / "cells").iterdir())
    for path in (cell / "trial_000" / "record.json", cell / "cell.json", out / "matrix.json",
                 out / "matrix.parquet", out / "perf.md", out / "report.html"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path


# -- auto: defaults that fit the machine --------------------------------------------------------

def test_default_workload_records_what_auto_chose(tmp_path: Path):
    """A machine without a GPU (GPUs hidden on one that has them): the ``cpu`` profile.
    tests/test_auto_gpu.py has the GPU host's side."""
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.steps=2",
                      f"output={out}"], cwd=tmp_path, env=NO_GPU, timeout=300)
    assert done.returncode == 0, done.stderr
    (rec,) = records(out)
    assert rec["auto"]["profile"] == "cpu" and rec["auto"]["machine"] == "no GPU"
    assert rec["auto"]["chosen"]["workload.nproc"] == 2
    assert rec["auto"]["chosen"]["workload.model"] == "tiny"
    assert "workload.steps" not in rec["auto"]["chosen"]  # given, not chosen
    assert "--nproc_per_node=2" in rec["argv"] and "model=tiny" in rec["argv"]
    assert "auto (no GPU): workload.device=cpu workload.nproc=2" in done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["cells"][0]["auto"] == rec["auto"]


def test_a_gpu_the_machine_lacks_is_refused_before_launch(tmp_path: Path):
    """No GPU visible (hidden where there is one); tests/test_auto_gpu.py asks a GPU host for
    more GPUs than it has."""
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "workload=benchmark", "trials=1", "workload.device=cuda",
                      f"output={out}"], cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 1
    assert ("workload.device=cuda but no GPU is visible; use workload.device=auto or "
            "workload.device=cpu") in done.stderr
    assert records(out) == []


def _benchmark_workload(**overrides):
    from hydra import compose, initialize_config_module

    import aorta_core.app.cell_job  # noqa: F401  (registers the config's resolvers)

    with initialize_config_module("aorta_core.conf", version_base="1.3"):
        cfg = compose("config", overrides=["output=x", *(f"workload.{k}={v}"
                                                        for k, v in overrides.items())])
    return cfg


def test_gpu_profile_takes_one_rank_per_visible_gpu():
    cfg = _benchmark_workload()
    h200 = Gpus("cuda", 4, ("NVIDIA H200",) * 4)
    choice = resolve(cfg, {}, h200)
    assert choice.profile == "gpu" and choice.machine == "4 CUDA GPUs (NVIDIA H200)"
    assert choice.chosen["workload.nproc"] == 4 and cfg.workload.model == "base"
    command = OmegaConf.to_container(cfg, resolve=True)["command"]
    assert "--nproc_per_node=4" in command and "training.mixed_precision=bf16" in command


def test_more_ranks_than_gpus_is_refused_with_the_fix():
    cfg = _benchmark_workload(nproc=2)
    with pytest.raises(AutoError) as err:
        resolve(cfg, {"CUDA_VISIBLE_DEVICES": "0"}, Gpus("cuda", 1, ("NVIDIA H200",)))
    assert str(err.value) == (
        "workload.nproc=2 needs 2 GPUs (one per rank) but this machine shows 1 CUDA GPU "
        "(NVIDIA H200) (CUDA_VISIBLE_DEVICES=0); use workload.nproc=auto (1), or "
        "workload.device=cpu for gloo ranks on the CPU")


def test_device_cpu_keeps_the_cpu_profile_on_a_gpu_machine():
    cfg = _benchmark_workload(device="cpu", nproc=3)
    choice = resolve(cfg, {}, Gpus("rocm", 1, ("AMD Instinct MI300X",)))
    assert choice.profile == "cpu" and cfg.workload.nproc == 3 and cfg.workload.model == "tiny"
