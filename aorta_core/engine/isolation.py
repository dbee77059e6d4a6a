"""Calling a collector's hook so that nothing it does escapes into the sweep.

Each call runs in a child process forked from aorta (so the closure the caller passes, the loaded
plugins and the call's arguments are there as they are here), in a process group of its own,
under a time limit (``hook_timeout``) that holds whatever the hook does: one that never returns,
or holds the GIL (a regular expression backtracking for ever), is killed at the limit with its
group (a subprocess it started too); Ctrl-C or SIGTERM to aorta kills it at once and stops the
sweep as ever; it dies with aorta (``PR_SET_PDEATHSIG``, also after ``kill -9``).

What comes back is the value the closure returned, made plain there by the caller (numbers,
text, lists, dicts, paths, aorta's own dataclasses: anything else is refused unread, as is an
answer cut short or garbled), or one line: an exception (also ``SystemExit`` or
``KeyboardInterrupt`` raised by the hook), the end of the process (``exited with status 3``:
``os._exit`` from any of its threads; ``was killed by SIGSEGV``), a timeout. The warnings it
emitted come back too. Nothing else does: the working directory, ``os.environ``,
``sys.stdout``/``sys.stderr``, the recursion limit, threads left running (they end with the
child) and module state stay in the child, so state does not carry from one call to the next.
A change to the working directory or ``os.environ`` is still named in one warning: a hook that
means to change the launch must return it (:data:`_THE_WAY`).

Forking a process that runs other threads (the console's spinner, a pool's) is safe as the
child touches nothing they may hold: it prints through streams of its own on fds 1 and 2 (never
through Rich), records warnings instead of showing them, drops its inherited pools
(:mod:`aorta_core.api.parallel`), and never collects the garbage it inherits (``gc.freeze``: a
finalizer of aorta's, a temporary folder's, must not run twice). Python 3.12+ warns of every
fork of a multi-threaded process (``DeprecationWarning``); it is silenced for this fork alone.
A library whose own threads ran in aorta before the call cannot run in a child (polars after
aorta's queries: the matrix, before ``report_sections``). Once polars' pool runs here, a call
runs in a thread of aorta's process instead, as hooks did before they ran apart: its answer is
made plain the same way and its changes to the process undone, but a hook that does not return
in time is abandoned, not killed (:func:`_threads_no_child_has`).

What must live in aorta's process (a plugin's import and the objects that describe it, the
commands it adds) goes through :func:`load_in_process`: tried in a child first, then run here.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
import pickle
import re
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, is_dataclass
from typing import Any, NoReturn

from aorta_core.api.contracts import OptionError, SetupError
from aorta_core.api.oneline import exception_line, named_once
from aorta_core.engine.progress import stream_of_ones_own, warning_line

#: Seconds a hook may take when no ``hook_timeout`` is configured (``aorta parse``).
DEFAULT_HOOK_TIMEOUT_S = 300.0

#: How a hook must change a launch instead of the process (the end of every restore warning).
_THE_WAY = ("a hook must leave aorta's process alone: a launch's environment and folder are "
            "set in the Launch that wrap_argv returns (docs/plugins.md#hooks)")
#: Taken before any plugin runs: a hook that replaces them in its process cannot keep that
#: process from ending or answering.
_EXIT, _WRITE, _DUMPS = os._exit, os.write, pickle.dumps
#: The largest answer taken from a hook (its pickled value and notes).
_ANSWER_LIMIT = 256 << 20
_LENGTH_BYTES = 8
#: Where there is no pidfd (Linux < 5.3): how often the child's end is looked for.
_POLL_S = 0.05
#: The exit status of a child that could not send its answer.
_NO_ANSWER = 70


@dataclass
class HookOutcome:
    value: Any = None
    #: One line when the hook raised, its process ended or it did not return in time; None when
    #: it returned.
    failure: str | None = None
    #: What it raised: a ``SetupError`` or ``OptionError`` with the hook's message (the caller
    #: shows the plugin's words), else a :class:`HookError`; None when it did not raise.
    error: BaseException | None = None
    warnings: list[str] = field(default_factory=list)


class HookError(Exception):
    """Any other exception a hook raised, as its one line (the object stays in its process)."""


#: The collector and hook that run in this process, as :func:`naming` tells it.
_running: list[tuple[str | None, str]] = [(None, "a hook")]


def naming(collector: str, hook: str) -> None:
    """Called before a collector's hook (by the registry): which collector and hook run, for the
    line about what the hook changed."""
    _running[0] = (collector, hook)


def call_hook(fn: Callable[[], Any], timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S
              ) -> HookOutcome:
    """Run ``fn()`` in a child process (in a thread here once polars' threads run here:
    :func:`_threads_no_child_has`); whatever happens, return a :class:`HookOutcome`."""
    if _threads_no_child_has():
        return _outcome(_in_a_thread(fn, timeout_s))
    try:
        answer = _run_apart(fn, timeout_s)
    except Exception as exc:  # aorta's side of the call: a fork refused (EAGAIN), ...
        return HookOutcome(failure=f"could not run in a process of its own "
                                   f"({exception_line(exc)})")
    return _outcome(answer)


def load_in_process(fn: Callable[[], Any], timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S
                    ) -> HookOutcome:
    """``fn()`` for what must live in aorta's process: a plugin's import and the objects that
    describe it, the commands it adds. It is tried first in a child as by :func:`call_hook`
    (its value left there), where an exit, a hang or a crash costs only this call; once it
    returned there it runs here, its exceptions one line, and what it changes of the working
    directory, ``os.environ``, ``sys.stdout`` and ``sys.stderr`` undone without a second
    warning. Only a plugin that acts otherwise the second time could hang or end aorta here.
    Once polars' threads run here there is no child to try it in (a try in a thread of this
    process would import and register it twice): it runs here once."""
    tried = HookOutcome()
    if not _threads_no_child_has():
        tried = call_hook(lambda: _left_there(fn()), timeout_s)
    if tried.failure is not None:
        return tried
    state, streams = _ProcessState(), (sys.stdout, sys.stderr)
    try:
        with warnings.catch_warnings():  # they were recorded in the child
            warnings.simplefilter("ignore")
            return HookOutcome(value=fn(), warnings=tried.warnings)
    except Exception as exc:
        return HookOutcome(failure=_line(exc), error=HookError(_line(exc)))
    finally:
        state.restore()
        sys.stdout, sys.stderr = streams


#: The threads of polars' pool, started by its first query in this process.
_POLARS_POOL = re.compile(r"polars-\d+")


def _threads_no_child_has() -> bool:
    """Whether polars' thread pool runs in this process (aorta's matrix queries at the end of a
    sweep start it): a forked child has none of its threads, and a hook's polars query there
    would wait for ever. Told by the threads' names (``polars-<n>``) in ``/proc``."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8") as fh:
                if _POLARS_POOL.fullmatch(fh.read().strip()):
                    return True
        except OSError:  # the thread ended meanwhile
            continue
    return False


def _in_a_thread(fn: Callable[[], Any], timeout_s: float | None) -> bytes | str:
    """``fn``'s answer as a child sends it, computed in a daemon thread of this process: a hook
    that does not return in time is abandoned (it keeps its thread until aorta ends), not
    killed. Only for calls made once polars' threads run here (the end of a sweep's
    ``report_sections``): a child process could not run polars."""
    box: list[bytes] = []
    thread = threading.Thread(target=lambda: box.append(_packed(_answer(fn))), daemon=True,
                              name="aorta-hook")
    thread.start()
    thread.join(timeout_s)
    if not box:
        return f"did not return within {timeout_s:g} s (hook_timeout)"
    return box[0]


def _left_there(value: object) -> None:
    """What :func:`load_in_process`'s try sends back: nothing (the value may be of any type)."""


def _run_apart(fn: Callable[[], Any], timeout_s: float | None) -> bytes | str:
    """Fork, run ``fn`` in the child, and wait for its answer (:func:`_await`)."""
    parent, prctl = os.getpid(), _prctl()
    read_fd, write_fd = os.pipe()
    try:
        pid = _fork()
        if pid == 0:
            _child(fn, write_fd, parent, prctl)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # in aorta: the child never gets here
    try:
        return _await(pid, read_fd, timeout_s)
    finally:
        os.close(read_fd)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, loaded here once, so that no child imports anything; None where there
    is none (not Linux)."""
    import ctypes

    try:
        return ctypes.CDLL(None).prctl
    except (AttributeError, OSError):
        return None


#: Sent to aorta's whole process group (Ctrl-C; Slurm's or a user's ``kill -- -<pgid>``).
_GROUP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _fork() -> int:
    """``os.fork()``, and in aorta the child put in its own process group (the child does it
    too: whichever comes first). A Ctrl-C that reached the child while it was still in aorta's
    group, running Python's after-fork code, printed a traceback ("Exception ignored in
    _after_fork", 1 run in 25 on 16 cores): the group's signals are held across the fork, and a
    child that got one before it left the group ends of it quietly; aorta itself acts on it.
    Python 3.12+ warns of forking a process that runs threads: this one knows (module
    docstring)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _GROUP_SIGNALS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid:
            with contextlib.suppress(OSError):  # it has already done so, or already ended
                os.setpgid(pid, pid)
        else:  # never raise here: the child would go on in aorta's code
            with contextlib.suppress(OSError, ValueError):
                os.setpgid(0, 0)
                for signum in _GROUP_SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return pid


def _child(fn: Callable[[], Any], write_fd: int, parent: int,
           prctl: Callable[..., int] | None) -> NoReturn:
    """In the child: run ``fn``, send the answer, end; never return into aorta's code. The
    kernel kills it when aorta's calling thread ends (``kill -9`` of aorta): a hook that never
    returns must not outlive aorta."""
    status = _NO_ANSWER
    try:
        if prctl is not None:
            prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # aorta ended before that
            return
        gc.freeze()
        streams = _own_streams()
        answer = _answer(fn)
        for stream in streams:
            _flush(stream)
        _send(write_fd, answer)
        status = 0
    finally:
        _EXIT(status)


#: In a child: the streams it inherited (kept, never freed: their buffered text is aorta's).
_inherited: list[Any] = []


def _own_streams() -> list[Any]:
    """``sys.stdout`` and ``sys.stderr`` anew on the same fds: another thread of aorta may have
    been writing to them as it forked, and their locks came over held."""
    made = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        fresh = stream_of_ones_own(stream)
        if fresh is not stream:
            _inherited.append(stream)
            setattr(sys, name, fresh)
            made.append(fresh)
    return made


def _flush(stream: Any) -> None:
    with contextlib.suppress(OSError, ValueError):  # the hook closed it, or no one reads it
        stream.flush()


def _answer(fn: Callable[[], Any]) -> tuple:
    """Run ``fn``; what it gave, as plain values: ``(value, failure, raised, message, warnings,
    changes, (collector, hook))``."""
    _running[0] = (None, "a hook")
    state, limit = _ProcessState(), sys.getrecursionlimit()
    value, error = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn()
        except BaseException as exc:  # a hook must never end the sweep
            error = exc
        sys.setrecursionlimit(limit)  # a hook may have lowered it
    notes = [_text(w.message) for w in caught]
    if error is None:
        return value, None, None, "", notes, state.restore(), _running[0]
    raised = next((k.__name__ for k in (SetupError, OptionError) if isinstance(error, k)), "other")
    return None, _line(error), raised, _text(error), notes, state.restore(), _running[0]


def _line(exc: BaseException) -> str:
    """:func:`exception_line`, also for an exception whose message raises when read."""
    try:
        return exception_line(exc)
    except Exception:
        return f"{type(exc).__name__} (its message cannot be read)"


def _text(obj: object) -> str:
    """``obj`` as one line of plain text, whatever its ``__str__`` does."""
    try:
        return " ".join(str.__str__(str(obj)).split())
    except Exception as exc:
        return f"a {type(obj).__name__} that cannot be shown ({type(exc).__name__})"


def _packed(answer: tuple) -> bytes:
    """The answer pickled, its length first; a value that cannot be pickled is the hook's
    failure."""
    try:
        data = _DUMPS(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        unsent = f"returned what cannot be sent back to aorta ({_line(exc)})"
        data = _DUMPS((None, unsent, "other", unsent, *answer[4:]))
    return len(data).to_bytes(_LENGTH_BYTES, "big") + data


def _send(fd: int, answer: tuple) -> None:
    view = memoryview(_packed(answer))
    while view:
        view = view[_WRITE(fd, view):]


def _await(pid: int, read_fd: int, timeout_s: float | None) -> bytes | str:
    """The child's answer, or one line: how it ended without one, or that it ran out of time.
    The child is killed with its group at the time limit and when this is interrupted (Ctrl-C,
    SIGTERM: the interrupt goes on)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pidfd = _pidfd(pid)
    os.set_blocking(read_fd, False)
    received, status = bytearray(), None
    try:
        while status is None and not _whole(received):
            wait = _POLL_S if pidfd is None else 3600.0
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return f"did not return within {timeout_s:g} s (hook_timeout)"
            ready = select.select([read_fd, *([] if pidfd is None else [pidfd])], [], [], wait)[0]
            if not _drained(read_fd, received):
                return f"sent back more than {_ANSWER_LIMIT >> 20} MiB"
            if pidfd is None or pidfd in ready:
                status = _reaped(pid, block=False)
        _drained(read_fd, received)
        if status is None:  # it answered: it ends now
            status = _reaped(pid, block=True)
        return bytes(received) if _whole(received) else _ended(status)
    finally:
        if status is None:
            _kill(pid)
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, or Linux < 5.3: polled instead
        return None


def _drained(fd: int, into: bytearray) -> bool:
    """Read what the pipe holds now; False once the answer is over :data:`_ANSWER_LIMIT`."""
    while True:
        if len(into) > _ANSWER_LIMIT + _LENGTH_BYTES:
            return False
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            return True
        into += chunk


def _whole(received: bytearray) -> bool:
    size = int.from_bytes(received[:_LENGTH_BYTES], "big")
    return len(received) >= _LENGTH_BYTES and len(received) >= _LENGTH_BYTES + size


def _reaped(pid: int, block: bool) -> int | None:
    """The child's wait status once it has ended; None while it runs (``block``: wait)."""
    done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    return status if done else None


def _kill(pid: int) -> None:
    """End the child and its group now, and reap it."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):  # no such group (it had not made one yet)
            kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _ended(status: int) -> str:
    """How a child that sent no whole answer ended, in words."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    code = os.waitstatus_to_exitcode(status)
    return "could not send its answer back" if code == _NO_ANSWER else \
        f"exited with status {code}"


_KINDS = {"SetupError": SetupError, "OptionError": OptionError}


def _outcome(answer: bytes | str) -> HookOutcome:
    if isinstance(answer, str):
        return HookOutcome(failure=answer)
    try:
        value, failure, raised, message, notes, changes, (collector, hook) = _PlainUnpickler(
            io.BytesIO(answer[_LENGTH_BYTES:])).load()
    except _NotPlain as exc:
        return HookOutcome(failure=f"returned {exc}")
    except Exception as exc:  # garbled: the hook wrote into aorta's pipe
        return HookOutcome(failure=f"sent back an answer that cannot be read "
                                   f"({exception_line(exc)})")
    if changes:
        text = f"{hook} changed {' and '.join(changes)}; restored ({_THE_WAY})"
        warning_line(named_once(collector, text) if collector else text)
    error = None if raised is None else \
        _KINDS[raised](message) if raised in _KINDS else HookError(failure)
    return HookOutcome(value=value, failure=failure, error=error, warnings=notes)


class _PlainUnpickler(pickle.Unpickler):
    """Builds only plain values: containers, numbers and text (pickle's own opcodes), paths, and
    aorta's own dataclasses; never a plugin's class or a callable, whose code would run here."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in (("pathlib", "PosixPath"), ("pathlib", "PurePosixPath")):
            return super().find_class(module, name)
        found = getattr(sys.modules.get(module), name, None) \
            if module.startswith("aorta_core.") else None
        if isinstance(found, type) and is_dataclass(found):
            return found
        raise _NotPlain(f"a {module}.{name}; what a hook returns is made of numbers, text, "
                        "lists, dicts and paths")


class _NotPlain(pickle.UnpicklingError):
    """An answer holding an object of a type :class:`_PlainUnpickler` does not build."""


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


