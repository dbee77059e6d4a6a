"""Devices for parallel cells: each running cell holds one slot of the configured device list.

Parallel launchers (joblib, submitit's local executor) run several cells at once on one host.
A slot is an exclusive lock on ``<output>/.slots/slot_<k>.lock``; slot ``k`` owns devices
``devices[k * per_cell : (k + 1) * per_cell]``, exported through ``device_env`` (e.g.
``CUDA_VISIBLE_DEVICES`` or ``ROCR_VISIBLE_DEVICES``), so two cells never share a GPU. A cell that
finds every slot taken waits for one. The lock is a POSIX record lock, which the kernel drops when
the process dies and which, unlike ``flock``, a daemon forked by a collector hook does not
inherit (it would keep the slot after ``kill -9`` of aorta). Record locks never conflict within one
process, so cells running as threads of one process are kept apart by :data:`_held`, checked
before the file is opened (closing any descriptor of the file would drop the process's lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

POLL_S = 0.2

#: Slot files this process holds (by path), and the lock that guards the set.
_held: set[str] = set()
_held_guard = threading.Lock()


def _try_lock(path: Path) -> int | None:
    key = os.path.abspath(path)
    with _held_guard:
        if key in _held:
            return None
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o644)  # never through a link
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another process has it
            os.close(fd)
            return None
        _held.add(key)
    return fd


def _unlock(path: Path, fd: int) -> None:
    with _held_guard:
        os.close(fd)  # drops the record lock
        _held.discard(os.path.abspath(path))


@contextlib.contextmanager
def device_slot(
    output: Path, devices: Sequence[str] | None, per_cell: int, device_env: Sequence[str]
) -> Iterator[dict[str, str]]:
    """Hold a free slot while the cell runs; yield the environment that pins its devices."""
    if not devices:
        yield {}
        return
    slots = len(devices) // per_cell  # >= 1: checked when the cell was built
    folder = output / ".slots"
    if folder.is_symlink():  # aorta writes only inside output
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for k in range(slots):
            path = folder / f"slot_{k}.lock"
            fd = _try_lock(path)
            if fd is not None:
                break
        else:
            time.sleep(POLL_S)
            continue
        break
    try:
        visible = ",".join(str(d) for d in devices[k * per_cell : (k + 1) * per_cell])
        yield {name: visible for name in device_env}
    finally:
        _unlock(path, fd)
