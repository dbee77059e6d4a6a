"""Devices for parallel cells: each running cell holds one slot of the configured device list.

Parallel launchers (joblib, submitit's local executor) run several cells at once on one host.
A slot is an exclusive ``flock`` on ``<output>/.slots/slot_<k>.lock``; slot ``k`` owns devices
``devices[k * per_cell : (k + 1) * per_cell]``, exported through ``device_env`` (e.g.
``CUDA_VISIBLE_DEVICES`` or ``ROCR_VISIBLE_DEVICES``), so two cells never share a GPU. A cell that
finds every slot taken waits for one. The kernel drops the lock if the process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

POLL_S = 0.2


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o644)  # never through a link
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


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
            fd = _try_lock(folder / f"slot_{k}.lock")
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
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
