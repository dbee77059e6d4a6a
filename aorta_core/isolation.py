"""Calling a collector's hook so that nothing it does escapes into the sweep.

Each call runs in a daemon thread under a time limit (``hook_timeout``). An exception — also
``SystemExit`` or ``KeyboardInterrupt`` raised by the hook itself — a wrong return type checked by
the caller, and a timeout all become one line for that collector; the warnings the hook emits are
kept. A real Ctrl-C reaches the sweep's main thread, which is only waiting, and stops the sweep.
A hook that never returns is abandoned (its thread cannot be killed; it ends with the process).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds a hook may take when no ``hook_timeout`` is configured (``aorta parse``).
DEFAULT_HOOK_TIMEOUT_S = 300.0


@dataclass
class HookOutcome:
    value: Any = None
    #: One line when the hook raised or did not return in time; None when it returned.
    failure: str | None = None
    #: The exception it raised (the caller tells a ``SetupError`` from a bug).
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (``Type`` alone when the message is empty)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def call_hook(fn: Callable[[], Any], timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S
              ) -> HookOutcome:
    """Run ``fn()`` in its own thread; whatever happens, return a :class:`HookOutcome`."""
    outcome = HookOutcome()

    def target() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                outcome.value = fn()
            except BaseException as exc:  # a hook must never end the sweep
                outcome.error, outcome.failure = exc, one_line(exc)
        outcome.warnings = [str(w.message) for w in caught]

    thread = threading.Thread(target=target, name="aorta-hook", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return HookOutcome(failure=f"did not return within {timeout_s:g} s (hook_timeout)")
    return outcome


def named_once(name: str, text: str) -> str:
    """``<name>: <text>``, unless collector ``name`` already named itself (they often do)."""
    return text if text.startswith(f"{name}: ") else f"{name}: {text}"
