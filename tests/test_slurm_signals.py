"""A cell in a job of the Slurm launcher (submitit sets SUBMITIT_EXECUTOR=slurm) when Slurm ends
the job, and a whole sweep inside an allocation of the user's own (SLURM_JOB_ID alone): Slurm
signals every process of the job, which these tests do by hand, without a cluster (the live ones
are in test_slurm_live.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


LAUNCHER_JOB = {"SLURM_JOB_ID": "4242", "SUBMITIT_EXECUTOR": "slurm"}


def _sweep_signalled(tmp_path: Path, sig: signal.Signals, job: dict[str, str] = LAUNCHER_JOB
                     ) -> tuple[str, Path, int]:
    out = tmp_path / "out"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=3", f"output={out}", "--",
         "sleep", "60"], cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "AORTA_REPORT_PNG": "0", **job})
    try:
        deadline = time.monotonic() + 60
        while not any(_cmdline(p).startswith(b"sleep") for p in _descendants(sweep.pid)):
            assert time.monotonic() < deadline, "the trial never started"
            time.sleep(0.1)
        for pid in [sweep.pid, *_descendants(sweep.pid)]:  # as Slurm does: every process
            with contextlib.suppress(ProcessLookupError):  # gone since it was listed (the sweep
                os.kill(pid, sig)                          # signalled first may end it)
        _, stderr = sweep.communicate(timeout=60)
    finally:
        sweep.kill()
    return stderr, out, sweep.returncode


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the trial")
def test_sigterm_leaves_the_running_trial_unrecorded_for_the_next_run(tmp_path: Path):
    stderr, out, status = _sweep_signalled(tmp_path, signal.SIGTERM)
    assert ("Slurm ended job 4242 (SIGTERM) during default trial 0; that trial and the ones after "
            "it are not recorded: run the same command again") in stderr
    assert list(out.glob("cells/*/trial_*/record.json")) == []
    # the sweep does not pass for what it did not run: 0 of 3 planned trials
    (cell,) = json.loads((out / "matrix.json").read_text())["cells"]
    assert (cell["trials"]["total"], cell["planned_trials"]) == (0, 3)
    assert status == 1, stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the trial")
def test_sigusr2_before_the_time_limit_records_a_timed_out_trial_with_the_reason(
        tmp_path: Path):
    stderr, out, _ = _sweep_signalled(tmp_path, signal.SIGUSR2)
    (path,) = out.glob("cells/*/trial_*/record.json")
    record = json.loads(path.read_text())
    assert (record["trial"], record["verdict"], record["timed_out"]) == (0, "fail", True)
    assert record["error"] == ("Slurm job 4242 reached its time limit (signalled "
                               "hydra.launcher.signal_delay_s before it); trial ended: raise "
                               "hydra.launcher.timeout_min")
    assert "later trials are not run" in stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the trial")
def test_a_sweep_in_an_allocation_of_its_own_ends_on_sigterm_as_any_sweep(tmp_path: Path):
    """sbatch/salloc around `aorta` itself (SLURM_JOB_ID, no submitit): scancel ends the whole
    sweep with its resume line, not only the running cell."""
    stderr, out, status = _sweep_signalled(tmp_path, signal.SIGTERM, {"SLURM_JOB_ID": "4242"})
    assert status == 143, stderr
    assert f"aorta: error: terminated (SIGTERM): 0 trials recorded in {out}; run the same " \
           "command again to resume" in stderr
    assert "Slurm ended job" not in stderr
    assert list(out.glob("cells/*/trial_*/record.json")) == []
