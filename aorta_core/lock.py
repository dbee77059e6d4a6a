"""One sweep per output folder: a kernel lock (``flock``) on ``<output>/.aorta.lock``.

The kernel drops the lock when its holder dies, so a killed sweep never blocks the next one, and
two sweeps can never both hold it. The holder's pid and host are written into the file only to
name it in messages; the file is emptied on release and never removed (removing it would let a
third sweep lock a new file while a second still holds the old one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
from pathlib import Path

import msgspec

LOCK_NAME = ".aorta.lock"


class SweepLockedError(RuntimeError):
    """Another live sweep writes into the same output folder, or the lock cannot be taken."""


def _holder(fd: int) -> dict | None:
    with contextlib.suppress(OSError, msgspec.DecodeError):
        os.lseek(fd, 0, os.SEEK_SET)
        owner = msgspec.json.decode(os.read(fd, 4096))
        if isinstance(owner, dict):
            return owner
    return None


class SweepLock:
    """Held by the process that drives the sweep (not by its workers)."""

    def __init__(self, output: Path) -> None:
        self.path = output / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> dict | None:
        """Take the lock; return what a holder that died without releasing it had written."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise SweepLockedError(
                f"cannot lock {self.path} ({exc.strerror}); remove it if it is not aorta's lock"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SweepLockedError(f"{self.path} is not a regular file; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _holder(fd) or {}
            os.close(fd)
            who = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"
            raise SweepLockedError(
                f"another sweep ({who}) is writing to {self.path.parent}; wait for it or choose "
                "another output=<dir>"
            ) from None
        previous = _holder(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, msgspec.json.encode({"pid": os.getpid(), "host": socket.gethostname()}), 0)
        self.fd = fd
        return previous

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)  # closing drops the flock
        self.fd = None
