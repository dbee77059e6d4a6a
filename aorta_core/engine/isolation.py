"""Calling a collector's hook so that nothing it does escapes into the sweep.

Each call runs in a daemon thread under a time limit (``hook_timeout``). An exception — also
``SystemExit`` or ``KeyboardInterrupt`` raised by the hook itself — a wrong return type checked by
the caller, and a timeout all become one line for that collector; the warnings the hook emits are
kept. A real Ctrl-C reaches the sweep's main thread, which is only waiting, and stops the sweep.
A hook that never returns is abandoned (its thread cannot be killed; it ends with the process).

What a hook changes in the process itself is undone after every call, with one warning naming the
collector, the hook and the change: the working directory (the next trial would run there) and
``os.environ`` (other collectors and later trials would see it; a new variable whose name starts
with ``_``, a library's own as it is imported, is undone without a warning); a hook abandoned at
its timeout can still change them afterwards. ``os._exit`` called in a hook's thread ends that
hook as ``SystemExit`` does instead of the whole process; called from any other thread while a
hook runs, it still ends the process, after a line naming the hook.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aorta_core.api.oneline import exception_line, named_once

#: Seconds a hook may take when no ``hook_timeout`` is configured (``aorta parse``).
DEFAULT_HOOK_TIMEOUT_S = 300.0

#: How a hook must change a launch instead of the process (the end of every restore warning).
_THE_WAY = ("a hook must leave aorta's process alone: a launch's environment and folder are "
            "set in the Launch that wrap_argv returns (docs/plugins.md#hooks)")
_REAL_EXIT = os._exit


@dataclass
class HookOutcome:
    value: Any = None
    #: One line when the hook raised or did not return in time; None when it returned.
    failure: str | None = None
    #: The exception it raised (the caller tells a ``SetupError`` from a bug).
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Running:
    """What a hook thread runs, as :func:`naming` tells it (unnamed: a bare ``call_hook``)."""

    collector: str | None = None
    hook: str = "a hook"


#: Every hook thread still running, by thread ident (an abandoned one stays until it ends).
_running: dict[int, _Running] = {}


def naming(collector: str, hook: str) -> None:
    """Called in a hook's thread (by the registry): which collector and hook run there, for the
    lines about what the hook changed or how it exited."""
    running = _running.get(threading.get_ident())
    if running is not None:
        running.collector, running.hook = collector, hook


def call_hook(fn: Callable[[], Any], timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S
              ) -> HookOutcome:
    """Run ``fn()`` in its own thread; whatever happens, return a :class:`HookOutcome`."""
    _guard_exit()
    outcome, running, process = HookOutcome(), _Running(), _ProcessState()

    def target() -> None:
        _running[threading.get_ident()] = running
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    outcome.value = fn()
                except BaseException as exc:  # a hook must never end the sweep
                    outcome.error, outcome.failure = exc, exception_line(exc)
            outcome.warnings = [str(w.message) for w in caught]
        finally:
            del _running[threading.get_ident()]

    thread = threading.Thread(target=target, name="aorta-hook", daemon=True)
    thread.start()
    thread.join(timeout_s)
    changes = process.restore()
    if changes:
        _warn(running, f"{running.hook} changed {' and '.join(changes)}; restored ({_THE_WAY})")
    if thread.is_alive():
        return HookOutcome(failure=f"did not return within {timeout_s:g} s (hook_timeout)")
    return outcome


class _ProcessState:
    """The working directory (an fd to it: a path may be renamed) and ``os.environ`` before a
    hook, put back after it."""

    def __init__(self) -> None:
        flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_PATH", 0)  # O_PATH: no read right
        try:
            self.cwd_fd: int | None = os.open(".", flags)
        except OSError:  # no usable folder to return to: nothing to restore either
            self.cwd_fd = None
        self.environ = dict(os.environ)

    def restore(self) -> list[str]:
        """Put both back; what had changed, in words."""
        return [c for c in (self._restore_cwd(), self._restore_environ()) if c]

    def _restore_cwd(self) -> str | None:
        if self.cwd_fd is None:
            return None
        try:
            if _same_folder(self.cwd_fd):
                return None
            where = _cwd_text()
            os.fchdir(self.cwd_fd)
            return f"the working directory (to {where})"
        finally:
            os.close(self.cwd_fd)

    def _restore_environ(self) -> str | None:
        now = dict(os.environ)
        names = sorted(n for n in self.environ.keys() | now.keys()
                       if self.environ.get(n) != now.get(n))
        for name in names:
            if name in self.environ:
                os.environ[name] = self.environ[name]
            else:
                del os.environ[name]
        # a library's own variable, set as it is imported (polars: ``_RJEM_MALLOC_CONF``), is
        # undone without a word: the hook did not choose it
        names = [n for n in names if not (n.startswith("_") and n not in self.environ)]
        if not names:
            return None
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return f"os.environ ({shown})"


def _same_folder(fd: int) -> bool:
    try:
        return os.path.samestat(os.stat("."), os.fstat(fd))
    except OSError:  # the hook's folder is gone
        return False


def _cwd_text() -> str:
    try:
        return repr(os.getcwd())
    except OSError:
        return "a folder since removed"


def _warn(running: _Running, text: str) -> None:
    from aorta_core.engine.progress import warning_line  # progress imports this module

    warning_line(named_once(running.collector, text) if running.collector else text)


@functools.cache
def _guard_exit() -> None:
    """From the first hook on, ``os._exit`` in a hook's thread of this process raises instead;
    a forked child (another pid) and aorta's own threads still exit for real."""
    os._exit = functools.partial(_exit, os.getpid())


def _exit(owner_pid: int, status: int) -> None:
    """``os._exit`` once guarded: the hook's own thread gets ``SystemExit``; any other thread of
    this process while a hook runs (one the hook started) ends it, after a line naming it."""
    if os.getpid() == owner_pid:
        if threading.get_ident() in _running:
            raise SystemExit(f"os._exit({status})")  # ends the hook, as sys.exit there does
        if _running:
            hooks = ", ".join(named_once(r.collector, r.hook) if r.collector else r.hook
                              for r in list(_running.values()))
            os.write(2, f"aorta: error: os._exit({status}) called while {hooks} ran (a thread "
                        f"a hook started?); aorta ends with status {status}\n".encode())
    _REAL_EXIT(status)


