"""Sweeps on a real Slurm (``pytest -m slurm``; ``nox -s slurm`` starts one on this host with
scripts/slurm/start.sh and points ``SLURM_CONF`` at it). Skipped, with the reason, where no
cluster answers."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta
from needs import needs

SUBMITIT = "hydra_plugins.hydra_submitit_launcher"
REPO = Path(__file__).resolve().parents[1]


def _cluster() -> str | None:
    """Why no cluster can be used here, or None."""
    if shutil.which("sinfo") is None:
        return "no sinfo: install slurm-wlm, or run nox -s slurm"
    if not os.environ.get("SLURM_CONF"):
        return "SLURM_CONF is unset: start a cluster (scripts/slurm/start.sh DIR) or nox -s slurm"
    done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or "idle" not in done.stdout:
        return f"no idle Slurm node (sinfo: {(done.stderr or done.stdout).strip()[:200]})"
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(_cluster() is not None,
                                                    reason=_cluster() or "")]

#: The launcher on this cluster: no GPUs, one CPU a cell, no memory request.
SLURM = ["hydra/launcher=aorta_slurm", "hydra.launcher.gpus_per_node=0",
         "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=null"]


def _sacct(*args: str) -> list[list[str]]:
    done = subprocess.run(["sacct", "-X", "-n", "-P", *args], capture_output=True, text=True,
                          check=True, timeout=30)
    return [line.split("|") for line in done.stdout.splitlines() if line]


def _job_ids(out: Path) -> set[str]:
    """The array jobs submitit submitted for this sweep (its folders are named by job id)."""
    return {p.name.split("_")[0] for p in (out / ".submitit").iterdir() if p.name[0].isdigit()}


def _shape(recs: list[dict]) -> list[tuple]:
    return sorted((r["cell"], r["trial"], r["verdict"], tuple(sorted(r["metrics"])))
                  for r in recs)


@needs(SUBMITIT, "aorta_rusage")
def test_a_sweep_runs_its_cells_as_slurm_jobs_and_records_what_a_local_run_does(tmp_path: Path):
    argv = ["sweep=repeat", "trials=2", "+cell=1,2", "collector=rusage", "--",
            sys.executable, "-c", "pass"]
    out = tmp_path / "slurm"
    done = run_aorta(["-m", *SLURM, f"output={out}", *argv], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    (job,) = _job_ids(out)
    def both():
        """sacct's rows of both array tasks"""
        rows = _sacct("-j", job, "-o", "JobID,JobName,State")
        return rows if sum("_" in r[0] for r in rows) == 2 else None

    tasks = _wait_for(both)
    assert sorted(t[0] for t in tasks) == [f"{job}_0", f"{job}_1"]
    assert {(t[1], t[2]) for t in tasks} == {("aorta", "COMPLETED")}
    local = tmp_path / "local"
    done = run_aorta(["-m", f"output={local}", *argv], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _shape(records(out)) == _shape(records(local))
    assert len(records(out)) == 4


@needs(SUBMITIT)
def test_a_sweep_asking_for_gpus_the_cluster_lacks_names_the_key_to_change(tmp_path: Path):
    """aorta_slurm asks for a GPU per cell; sbatch of this GPU-less cluster refuses it."""
    gpu = [a for a in SLURM if not a.startswith("hydra.launcher.gpus_per_node")]
    out = tmp_path / "out"
    done = run_aorta(["-m", *gpu, f"output={out}", "sweep=repeat", "trials=1", "--", "true"],
                     cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("aorta: error: the sweep could not start (FailedJobError: "), last
    assert "Invalid generic resource (gres) specification" in last, last
    assert "set hydra.launcher.gpus_per_node=0" in last, last
    assert not list(out.glob("cells/*/trial_*"))


def _wait_for(what, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"gave up after {timeout_s} s waiting for {what.__doc__}")


@needs(SUBMITIT)
def test_scancel_of_a_running_cell_leaves_a_sweep_that_resumes_with_only_the_missing_trials(
        tmp_path: Path):
    out = tmp_path / "out"
    argv = ["-m", *SLURM, "sweep=repeat", "trials=4", f"output={out}", "--", "sleep", "1.5"]
    sweep = subprocess.Popen([sys.executable, "-m", "aorta_core", *argv], cwd=tmp_path,
                             env={**os.environ, "AORTA_REPORT_PNG": "0"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def running():
            """a running aorta job with a trial recorded"""
            jobs = subprocess.run(["squeue", "-h", "-t", "R", "-n", "aorta", "-o", "%i"],
                                  capture_output=True, text=True).stdout.split()
            return jobs if jobs and records(out) else None

        (job,) = _wait_for(running)
        subprocess.run(["scancel", job], check=True)
        stdout, stderr = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    # the unrun trials are said and fail the command, which the re-run completes
    assert sweep.returncode == 1, stderr
    assert "cells with failed or unrun trials: default" in stdout + stderr
    logs = "".join(p.read_text() for p in out.glob(".submitit/*/*.err"))
    assert "(SIGTERM) during default trial" in logs and "run the same command again" in logs
    def cancelled():
        """sacct's CANCELLED for the job"""
        return [s for (s,) in _sacct("-j", job.split("_")[0], "-o", "State")
                if s.startswith("CANCELLED")]

    _wait_for(cancelled)
    before = {(r["cell"], r["trial"]): r["recorded_at_unix"] for r in records(out)}
    assert 1 <= len(before) < 4 and {r["verdict"] for r in records(out)} == {"pass"}
    done = run_aorta(argv, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    after = {(r["cell"], r["trial"]): r["recorded_at_unix"] for r in records(out)}
    assert len(after) == 4 and all(after[k] == t for k, t in before.items())
    assert len(_job_ids(out)) == 2


@needs(SUBMITIT)
def test_a_cell_at_its_time_limit_records_a_timed_out_trial_with_the_reason(tmp_path: Path):
    out = tmp_path / "out"
    # submitit asks Slurm for SIGUSR2 signal_delay_s before the 1 min limit: here at 30 s
    done = run_aorta(["-m", *SLURM, "hydra.launcher.timeout_min=1",
                      "hydra.launcher.signal_delay_s=30", "sweep=repeat", "trials=2",
                      f"output={out}", "--", "sleep", "300"], cwd=tmp_path, timeout=200)
    recs = records(out)
    assert [(r["trial"], r["verdict"], r["timed_out"]) for r in recs] == [(0, "fail", True)], (
        done.stderr)
    assert "reached its time limit" in recs[0]["error"]
    assert "raise hydra.launcher.timeout_min" in recs[0]["error"]
    assert 0 < recs[0]["wall_time_s"] < 60  # Slurm sends it on its next timer pass, often early
    assert done.returncode == 1, done.stderr


def test_the_multi_node_script_runs_torchrun_under_srun_across_two_slurm_nodes(tmp_path: Path):
    """scripts/multi_node/local_launch.sh, one task per Slurm node (node1, node2: two slurmd on
    this host), node rank = SLURM_NODEID, torchrun's static rendezvous on 127.0.0.1, gloo."""
    config = tmp_path / "cpu.yaml"
    config.write_text("device: cpu\n")
    script = REPO / "scripts/multi_node/local_launch.sh"
    done = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=1", "--label", "bash", "-c",
         f'echo "on $SLURMD_NODENAME"; exec {shlex.quote(str(script))} $SLURM_NODEID 127.0.0.1 '
         f"127.0.0.1 29533 2 2 {shlex.quote(str(tmp_path / 'exp'))} {shlex.quote(str(config))} "
         "1 4 128"],  # quoted: a checkout's path may hold spaces
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = (done.stdout + done.stderr).splitlines()
    assert {"0: on node1", "1: on node2"} <= {line.strip() for line in lines}
    assert any(line.startswith("0: node 0 (127.0.0.1) of 2") for line in lines)
    assert any(line.startswith("1: node 1 (127.0.0.1) of 2") for line in lines)
    assert any("benchmark done" in line and "'world_size': 2" in line for line in lines)


def test_a_workload_that_srun_starts_alone_names_its_ranks_from_slurm(tmp_path: Path):
    """No torchrun: each task's rank is Slurm's SLURM_PROCID (its local one SLURM_LOCALID), so
    per-rank files of two tasks do not land on one name."""
    code = ("from aorta_core.api import rank_from_env as r; "
            "print('rank', r(), 'local', r(variable='LOCAL_RANK'))")
    done = subprocess.run(["srun", "-N2", "--ntasks-per-node=1", sys.executable, "-c", code],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("rank ")) == [
        "rank 0 local 0", "rank 1 local 0"]


#: The tools' Slurm settings on this cluster: it schedules no memory.
TOOL_SLURM = "mem_gb=none,time=10,folder={folder}"
H200_TRACE = (REPO / "plugins/aorta_torchprof/tests/fixtures/cuda_h200_bench/torchprof/rank0"
              / "rank0_step4.pt.trace.json.gz")


def _eight_ranks(trial: Path) -> Path:
    """The H200 benchmark trace as eight ranks' (``distributedInfo.rank`` rewritten)."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(H200_TRACE.read_bytes()))
    for rank in range(8):
        doc["distributedInfo"].update(rank=rank, world_size=8)
        folder = trial / "torchprof" / f"rank{rank}"
        folder.mkdir(parents=True)
        (folder / f"rank{rank}_step4.pt.trace.json").write_text(json.dumps(doc))
    return trial


@needs(SUBMITIT, "aorta_torchprof")
def test_the_tools_read_eight_ranks_as_slurm_tasks_and_give_what_a_local_read_gives(
        tmp_path: Path):
    """Issue 44: ``aorta parse torchprof``, ``aorta diagnose`` and ``aorta timeline`` with
    ``--slurm``: every rank file a task of a job array (one array per map), the output the same
    bytes as the same command run here."""
    trial = _eight_ranks(tmp_path / "trial_000")
    jobs = tmp_path / "jobs"
    slurm = ["--slurm", TOOL_SLURM.format(folder=jobs)]
    commands = {"parse": ["parse", "torchprof", str(trial / "torchprof")],
                "diagnose": ["diagnose", str(trial), "--json"],
                "timeline": ["timeline", str(trial), "--output", "{out}"]}
    arrays = 0
    for name, argv in commands.items():
        outputs = []
        for where, extra in (("slurm", slurm), ("here", [])):
            out = tmp_path / f"{name}_{where}.json"
            done = run_aorta([*(a.format(out=out) for a in argv), *extra], cwd=tmp_path,
                             timeout=600)
            assert done.returncode == 0, done.stderr
            outputs.append(out.read_bytes() if name == "timeline" else done.stdout)
        assert outputs[0] == outputs[1], name
        made = {p.name.split("_")[0] for p in jobs.iterdir() if "_" in p.name}
        assert len(made) > arrays, name  # this command submitted its own array(s)
        arrays = len(made)
    tasks = [p.name for p in jobs.iterdir() if "_" in p.name and p.is_dir()]
    assert len(tasks) >= 3 * 8, sorted(tasks)


def dies(job: tuple[str, str, int]) -> str:
    """A task that kills itself (SIGKILL) the first ``times`` times it runs for ``name``."""
    import signal

    folder, name, times = job
    runs = Path(folder) / name
    ran = len(runs.read_text()) if runs.exists() else 0
    runs.write_text("x" * (ran + 1))
    if ran < times:
        os.kill(os.getpid(), signal.SIGKILL)
    return name


@needs(SUBMITIT)
def test_a_lost_task_runs_once_more_and_a_second_loss_is_named(tmp_path: Path, monkeypatch):
    """A task killed outright is submitted again, alone; killed again, its item's error names
    the Slurm job, its state and its log; the other items are untouched."""
    from aorta_core.api.parallel import parallel_map
    from aorta_core.api.slurm_map import SLURM_ENV

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # the task imports dies here
    monkeypatch.setenv(SLURM_ENV, TOOL_SLURM.format(folder=tmp_path / "jobs"))
    items = [(str(tmp_path), "never", 0), (str(tmp_path), "once", 1), (str(tmp_path), "twice", 2)]
    done = list(parallel_map(dies, items))
    assert [d.value for d in done] == ["never", "once", None]
    assert [len((tmp_path / name).read_text()) for name in ("never", "once", "twice")] == [1, 2, 2]
    error = done[2].error
    assert error.startswith("Slurm job ") and " ended FAILED without a result, twice (its log: " \
        in error, error
    assert error.endswith("_0_log.err)") and Path(error.split("its log: ")[1][:-1]).is_file()


@needs(SUBMITIT, "aorta_torchprof")
@pytest.mark.parametrize(("setting", "said"), [
    ("partition=nosuch", "aorta: error: --slurm partition=nosuch: not a partition of this "
                         "cluster (sinfo lists debug)"),
    ("constraint=nosuch", "aorta: error: --slurm: Slurm refused the job array (sbatch: error: "),
])
def test_what_slurm_refuses_is_one_line(tmp_path: Path, setting, said):
    """A partition sinfo does not list, before anything runs; what only sbatch can refuse (a
    feature no node has), when the first array is submitted: one line, exit status 2."""
    trial = _eight_ranks(tmp_path / "trial_000")
    done = run_aorta(["diagnose", str(trial), "--slurm",
                      f"{setting},{TOOL_SLURM.format(folder=tmp_path / 'jobs')}"],
                     cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(said), line
