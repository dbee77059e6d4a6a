"""One sweep per output folder: a kernel lock (POSIX record lock, ``fcntl``) on
``<output>/.aorta.lock``.

The kernel drops the lock when its holder dies, so a killed sweep never blocks the next one, and
two sweeps can never both hold it. It belongs to the aorta process alone: unlike ``flock``, a
record lock is not inherited across ``fork``, so a daemon a collector hook forks does not keep
the folder locked after aorta exits. Two rules follow from record locks: they never conflict
within one process, so a second :class:`SweepLock` of the same file in this process is refused
here; and closing any descriptor of the file drops the lock, so nothing else in aorta opens it
(a descriptor opened by a refused attempt is kept until the release). The holder's pid and host
are written into the file only to name it in messages; the file is emptied on release and never
removed (removing it would let a third sweep lock a new file while a second still holds the old
one).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
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


#: The locks this process holds, by (device, inode) of their file.
_held: dict[tuple[int, int], SweepLock] = {}


class SweepLock:
    """Held by the process that drives the sweep (not by its workers)."""

    def __init__(self, output: Path) -> None:
        self.path = output / LOCK_NAME
        self.fd: int | None = None
        self._pid = os.getpid()
        self._key: tuple[int, int] | None = None
        self._kept: list[int] = []  # descriptors of refused attempts in this process

    def acquire(self) -> dict | None:
        """Take the lock; return what a holder that died without releasing it had written."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise SweepLockedError(
                f"cannot lock {self.path} ({exc.strerror}); remove it if it is not aorta's lock"
            ) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise SweepLockedError(f"{self.path} is not a regular file; remove it")
        key = (info.st_dev, info.st_ino)
        holder = _held.get(key)
        if holder is not None and holder._pid == os.getpid():
            holder._kept.append(fd)  # closing it now would drop the holder's lock
            raise self._taken(fd)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                os.close(fd)
                raise SweepLockedError(f"cannot lock {self.path} ({exc.strerror}); choose an "
                                       "output=<dir> on a file system with locks") from None
            error = self._taken(fd)
            os.close(fd)
            raise error from None
        previous = _holder(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, msgspec.json.encode({"pid": os.getpid(), "host": os.uname().nodename}), 0)
        self.fd, self._pid, self._key = fd, os.getpid(), key
        _held[key] = self
        return previous

    def _taken(self, fd: int) -> SweepLockedError:
        owner = _holder(fd) or {}
        who = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"
        return SweepLockedError(f"another sweep ({who}) is writing to {self.path.parent}; wait "
                                "for it or choose another output=<dir>")

    def release(self) -> None:
        """Empty the file and drop the lock; in a process forked from the holder, which does
        not hold it, only close the descriptors."""
        if self.fd is None:
            return
        if self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            _held.pop(self._key, None)
        for fd in (self.fd, *self._kept):
            os.close(fd)  # closing drops the lock
        self.fd, self._kept = None, []
