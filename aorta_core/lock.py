"""One sweep per output folder: an exclusive lock file, taken over when its owner is dead."""

from __future__ import annotations

import contextlib
import os
import socket
import warnings
from pathlib import Path

import orjson

LOCK_NAME = ".aorta.lock"


class SweepLockedError(RuntimeError):
    """Another live sweep writes into the same output folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SweepLock:
    """Held by the process that drives the sweep (not by its workers)."""

    def __init__(self, output: Path) -> None:
        self.path = output / LOCK_NAME

    def acquire(self) -> None:
        me = {"pid": os.getpid(), "host": socket.gethostname()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            with os.fdopen(fd, "wb") as fh:
                fh.write(orjson.dumps(me))
            return
        raise SweepLockedError(f"could not lock {self.path}; remove it if no sweep is running")

    def _take_over_if_stale(self) -> None:
        try:
            owner = orjson.loads(self.path.read_bytes())
            pid, host = int(owner["pid"]), str(owner["host"])
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            owner, pid, host = None, -1, socket.gethostname()
        if host != socket.gethostname():
            raise SweepLockedError(
                f"{self.path.parent} is locked by a sweep on host {host} (pid {pid}); wait for it, "
                f"or delete {self.path} if that sweep is dead"
            )
        if pid == os.getpid() or (pid > 0 and _alive(pid)):
            raise SweepLockedError(
                f"another sweep (pid {pid}) is writing to {self.path.parent}; wait for it or "
                "choose another output=<dir>"
            )
        warnings.warn(
            f"taking over the stale lock {self.path} of dead process {pid}", stacklevel=2
        )
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
