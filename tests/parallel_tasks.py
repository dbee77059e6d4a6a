"""Module-level functions for tests/test_parallel.py: worker processes import them by name."""

from __future__ import annotations

import os
import signal
import warnings


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
