"""Run one launch in its own process group, with a timeout that ends the whole group, and a
watchdog that ends it if aorta itself dies (so no orphan writes into a re-run's files).

What left the group (``setsid``) is ended too: every launch carries its own token in its
environment (:mod:`aorta_core.engine.reaper`), and the processes still carrying it are killed
once the group has been ended, by aorta or by the watchdog."""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aorta_core.api.contracts import Launch
from aorta_core.engine import reaper

#: Seconds between SIGTERM and SIGKILL when a trial is ended.
TERMINATE_GRACE_S = 5.0

#: The longest single ``poll`` (a C int of milliseconds, ~24.8 days).
_MAX_POLL_MS = 2**31 - 1


class WatchdogError(RuntimeError):
    """The watchdog could not be started, so no trial is run: nothing would end it if aorta
    were killed."""


#: The watchdog's interpreter: aorta's own Python by its path, else by the kernel's link to the
#: running binary. The path may be empty (a launcher's ``argv[0]`` that is no path) or not
#: reachable by this user (a Python in a private home, started through ``setpriv`` or ``sudo``
#: with capabilities the process no longer has).
_RUNNING_BINARY = "/proc/self/exe"


class _Watchdog:
    """One per aorta process, started on the first trial
    (:func:`aorta_core.engine.reaper.watch`), in its own session (Ctrl-C in the terminal does
    not reach it)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        failures = [] if sys.executable else [
            "sys.executable is empty: run aorta by the path of its python or its script"]
        for python in filter(None, (sys.executable, _RUNNING_BINARY)):
            try:
                self.proc = subprocess.Popen(
                    [python, "-S", "-I", reaper.__file__, str(self.pid)],
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
                return
            except OSError as exc:
                failures.append(f"{python}: {exc.strerror or exc}")
        raise WatchdogError(f"cannot start aorta's watchdog ({'; '.join(failures)}); the trial "
                            "was not run, as nothing would end it if aorta were killed")

    def send(self, line: str) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.write(f"{line}\n".encode())
            self.proc.stdin.flush()


_watchdog: _Watchdog | None = None


def _watch() -> _Watchdog:
    global _watchdog
    if _watchdog is None or _watchdog.pid != os.getpid() or _watchdog.proc.poll() is not None:
        _watchdog = _Watchdog()  # first trial, a forked worker, or the watchdog was killed
    return _watchdog


def _open_log(path: Path):
    """A fresh log file; a link left at ``path`` is refused, never followed."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                             0o666), "wb")


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


def _wait(proc: subprocess.Popen, timeout_s: float | None) -> None:
    """``proc.wait(timeout_s)`` that returns the moment the child exits.

    ``Popen.wait`` with a timeout polls with sleeps that double up to 50 ms, so a 40 ms child
    is seen ~30 ms late (most of the per-trial overhead measured in bench/bench_core.py); a
    pidfd (Linux >= 5.3) wakes this thread at the exit instead. ``poll`` takes at most
    :data:`_MAX_POLL_MS` at a time, so any finite timeout (30 days, 1e300 s) is waited in turns.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or already reaped
        proc.wait(timeout=timeout_s)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left_ms = _MAX_POLL_MS if deadline is None else (deadline - time.monotonic()) * 1000
            last = deadline is not None and left_ms <= _MAX_POLL_MS
            if poller.poll(max(math.ceil(min(left_ms, _MAX_POLL_MS)), 0)):
                break
            if last:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    proc.wait()


def run_launch(
    launch: Launch, stdout_path: Path, stderr_path: Path, timeout_s: float | None
) -> ProcessOutcome:
    """Run ``launch`` to completion; never through a shell, stdin closed.

    Raises ``OSError`` (e.g. ``FileNotFoundError``) when the program cannot be started, and
    :class:`WatchdogError` when the watchdog cannot. Leftover processes of the group, and those
    that left it, are ended after the leader exits (or the timeout), so a trial never leaks
    workers into the next one. ``wall_time_s`` ends at the exit or at the timeout.
    """
    watchdog = _watch()
    token = secrets.token_hex(8)
    with _open_log(stdout_path) as out, _open_log(stderr_path) as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(launch.argv),
            env=reaper.marked(dict(launch.env), token),
            cwd=launch.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        watchdog.send(f"+{proc.pid} {token}")
        timed_out = False
        try:
            try:
                _wait(proc, timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            wall = time.perf_counter() - start  # at the exit or the timeout, never the grace
            if timed_out:
                _end_group(proc, TERMINATE_GRACE_S)
        except BaseException:
            _end_group(proc, TERMINATE_GRACE_S)
            raise
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            reaper.end_marked([token])
            watchdog.send(f"-{proc.pid} {token}")
    return ProcessOutcome(None if timed_out else proc.returncode, timed_out, wall)
