"""Which folder a sweep writes: the ``output=`` given, the latest unfinished run of the same
command, or a new ``aorta_runs/<timestamp>``; and the run file that lets the next command find it.

``<output>/.aorta.run.json`` says which command line made the run (its hash, from the working
folder, the overrides and the command after ``--``), whether it reached its end, and how its
trials ended. Without ``output=`` the same command resumes the latest run of that command under
``./aorta_runs/`` when it did not reach its end (Ctrl-C, a crash) or holds trials that the retry
policy runs again; otherwise it gets a new folder of its own, unique even for two sweeps started
in the same second. A folder that holds files aorta did not write is never an output: aorta
would replace a user's ``perf.md`` or ``report.html`` there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aorta_core.engine.lock import LOCK_NAME, SweepLock, SweepLockedError
from aorta_core.engine.records import RECORD_LIMIT, read_json, write_json_atomic
from aorta_core.engine.settings import RetryPolicy

RUN_FILE = ".aorta.run.json"
RUNS_DIR = "aorta_runs"
#: Keys that change how the command ends, not what it measures: the same run.
_NOT_IDENTITY = ("retry=", "allow_failures=", "order=")


def identity(overrides: list[str], command: list[str] | None) -> str:
    """The hash of a command line as the same command typed again in the same folder gives it."""
    kept = [a for a in overrides if not a.lstrip("+~").startswith(_NOT_IDENTITY)]
    text = repr((os.getcwd(), kept, command))  # repr escapes the bytes of a non-UTF-8 argv
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def run_file(folder: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):  # unreadable: not a run to resume
        value = read_json(folder / RUN_FILE, RECORD_LIMIT)
        if isinstance(value, dict):
            return value
    return None


def _mark(output: Path, content: dict[str, Any]) -> None:
    """Write the run file; one that cannot be written (a full disk, which the sweep then says
    itself) costs only the resume of this run without ``output=``."""
    with contextlib.suppress(OSError):
        write_json_atomic(output / RUN_FILE, content)


def mark_started(output: Path, run: str) -> None:
    _mark(output, {"identity": run, "started_at_unix": time.time(), "finished": False,
                   "trials": None})


def mark_finished(output: Path, run: str, trials: Mapping[str, int] | None) -> None:
    """The run reached its end; ``trials``: its verdict counts (None: the matrix failed)."""
    started = (run_file(output) or {}).get("started_at_unix")
    _mark(output, {"identity": run, "started_at_unix": started, "finished": True,
                   "trials": trials})


def _unfinished(run: Mapping[str, Any], retry: str) -> bool:
    trials = run.get("trials")
    if not run.get("finished") or not isinstance(trials, dict):
        return True
    return any(trials.get(verdict) for verdict in RetryPolicy(retry).verdicts)


def _free(folder: Path) -> bool:
    """No live sweep holds ``folder``'s lock (the probe takes and drops it at once)."""
    lock = SweepLock(folder)
    try:
        lock.acquire()
    except SweepLockedError:
        return False
    lock.release()
    return True


def resumable(run: str, retry: str) -> Path | None:
    """The latest run of this command under ``./aorta_runs/``, when it has trials left to do and
    no sweep writes into it now."""
    runs = Path.cwd() / RUNS_DIR
    with contextlib.suppress(OSError):
        found = [(info, folder) for folder in runs.iterdir()
                 if not folder.is_symlink() and (info := run_file(folder)) is not None
                 and info.get("identity") == run]
        if found:
            info, folder = max(found, key=lambda f: (f[0].get("started_at_unix") or 0, f[1].name))
            if _unfinished(info, retry) and _free(folder):
                return folder
    return None


def new_output() -> tuple[Path, Path]:
    """A new folder ``./aorta_runs/<timestamp>[-N]``, made here so that two sweeps started in
    the same second never share one; and the folder that existed before (what a failed start
    leaves is removed up to it)."""
    runs = Path.cwd() / RUNS_DIR
    existed = next(p for p in (runs, *runs.parents) if p.exists())
    runs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        folder = runs / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder, existed
    raise OSError(f"{runs} holds 10,000 runs started in one second")


def foreign_files(output: Path) -> list[str]:
    """The names in an existing ``output`` when it is not an aorta output; none when it is
    empty or holds aorta's run file, lock or ``cells/`` (older outputs have no run file)."""
    try:
        names = sorted(os.listdir(output))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [] if {RUN_FILE, LOCK_NAME, "cells"} & set(names) else names
