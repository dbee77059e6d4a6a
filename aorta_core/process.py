"""Run one launch in its own process group, with a timeout that ends the whole group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from aorta_core.contracts import Launch

#: Seconds between SIGTERM and SIGKILL when a trial is ended.
TERMINATE_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int | None
    timed_out: bool
    wall_time_s: float


def _end_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the whole group, give it ``grace_s``, then SIGKILL whatever is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a second Ctrl-C: no more grace
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_launch(
    launch: Launch, stdout_path: Path, stderr_path: Path, timeout_s: float | None
) -> ProcessOutcome:
    """Run ``launch`` to completion; never through a shell, stdin closed.

    Raises ``OSError`` (e.g. ``FileNotFoundError``) when the program cannot be started.
    Leftover processes of the group are ended after the leader exits, so a trial never
    leaks workers into the next one.
    """
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(launch.argv),
            env=dict(launch.env),
            cwd=launch.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _end_group(proc, TERMINATE_GRACE_S)
        except BaseException:
            _end_group(proc, TERMINATE_GRACE_S)
            raise
        wall = time.perf_counter() - start
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return ProcessOutcome(None if timed_out else proc.returncode, timed_out, wall)
