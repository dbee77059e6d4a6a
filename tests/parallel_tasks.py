"""Module-level functions for tests/test_parallel.py: worker processes import them by name."""

from __future__ import annotations

import os
import signal
import time
import warnings
from pathlib import Path


def square(n: int) -> tuple[int, int]:
    """``n * n`` and the process that computed it."""
    if n == 3:
        warnings.warn(f"three is odd ({os.getpid()})", UserWarning, stacklevel=1)
    return n * n, os.getpid()


def fail_on(n: int) -> int:
    """Each way an item can fail: an exception, memory, or its worker killed outright."""
    if n == 1:
        raise ValueError("one is not allowed")
    if n == 2:
        raise MemoryError
    if n == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return n


def env(name: str) -> str | None:
    return os.environ.get(name)


def last_byte(path: str) -> tuple[int, int | None]:
    """The size and last byte of a mapped file. A file named ``cut*`` is truncated first, as
    another process might while it is mapped, and its worker gets ``SIGBUS``; each attempt is
    logged to ``<path>.attempts``."""
    from pathlib import Path

    from aorta_core import mapped_limited

    with open(f"{path}.attempts", "a") as log:
        log.write("attempt\n")
    with mapped_limited(Path(path)) as data:
        if Path(path).name.startswith("cut") and len(data):
            os.truncate(path, 0)
        with memoryview(data) as view:  # as a decoder reads it: no bounds check
            return len(view), view[-1] if len(view) else None


def parent_pid(_: object) -> int:
    """The process this worker was forked from (the forkserver)."""
    return os.getppid()


def collecting(_: object) -> bool:
    """Whether the cyclic garbage collector runs during the task."""
    import gc

    return gc.isenabled()


def die_when_seen(arg: tuple[int, str]) -> int:
    """Item 0 kills its worker once item 1 has begun (as the system kills a worker mid-run);
    item 1 notes each attempt's pid in ``<folder>/attempts``, then runs a minute (a big
    parse)."""
    n, folder = arg
    attempts = Path(folder) / "attempts"
    if n == 0:
        while not attempts.exists():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    with open(attempts, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(60)
    return n
