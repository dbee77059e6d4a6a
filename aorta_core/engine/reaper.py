"""End what a trial started, also what left its process group; and aorta's watchdog.

A payload's child that calls ``setsid()`` (a daemonizing helper, a server started "in the
background") leaves the trial's process group, so ending the group misses it: it would go on
writing into the trial's logs after the record is written, and into a re-run. So every launch is
marked: its environment carries :data:`TOKEN_ENV`, a fresh random token (a launch inside another
aorta trial appends its own after a ``:``), which every process it starts inherits, in or out of
its group. :func:`end_marked` SIGKILLs every process still carrying a token, found through
``/proc/<pid>/environ``: Linux, and the processes this user may read. Where there is no
``/proc``, and for a process that replaced its whole environment, only the group is ended.

Run as a script (``python -S -I reaper.py <aorta's pid>``) this module is aorta's watchdog: it
keeps the running trials aorta announces on its stdin (``+<pgid> <token>`` when one starts,
``-<pgid> <token>`` when it has ended) and, once aorta has exited (even by ``kill -9``), ends
them: their groups and their tokens. Aorta's exit is seen through a pidfd, not only as the end
of the pipe, because a process forked from aorta (a collector's daemon) keeps the pipe open.
Standard library only: the watchdog runs it without site-packages.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Collection

#: In the environment of every launch: the tokens of the trials it belongs to, ``:``-separated.
TOKEN_ENV = "AORTA_TRIAL_TOKEN"

#: The longest :func:`end_marked` keeps looking for processes that do not die (e.g. blocked in
#: a driver call); a process that forks while being ended is found in the next round.
_END_WITHIN_S = 2.0
_KEY = f"\0{TOKEN_ENV}=".encode()


def marked(env: dict[str, str], token: str) -> dict[str, str]:
    """``env`` with ``token`` added to :data:`TOKEN_ENV`."""
    outer = env.get(TOKEN_ENV)
    return {**env, TOKEN_ENV: f"{outer}:{token}" if outer else token}


def _tokens_of(pid: int) -> set[bytes]:
    """The trial tokens in the environment of ``pid`` (none when it cannot be read: gone, a
    zombie, another user's, or no ``/proc``)."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY)
    except OSError:
        return set()
    chunks = [b"\0"]
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return set()
    finally:
        os.close(fd)
    environ = b"".join(chunks)
    at = environ.find(_KEY)
    if at < 0:
        return set()
    return set(environ[at + len(_KEY):].split(b"\0", 1)[0].split(b":"))


def _kill(pid: int, tokens: set[bytes]) -> None:
    """SIGKILL ``pid`` if it carries one of ``tokens``; through a pidfd where there is one, so
    that a pid reused by an unrelated process in between is never hit."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfd (Linux < 5.3): the pid was matched a moment ago
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    try:
        if _tokens_of(pid) & tokens:  # still the process that was matched
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def end_marked(tokens: Collection[str]) -> None:
    """SIGKILL every process whose environment carries one of ``tokens``, until none is left
    (or :data:`_END_WITHIN_S` has passed)."""
    wanted = {token.encode() for token in tokens}
    if not wanted or not os.path.isdir("/proc"):
        return
    deadline = time.monotonic() + _END_WITHIN_S
    while True:
        found = [int(name) for name in os.listdir("/proc")
                 if name.isdigit() and _tokens_of(int(name)) & wanted]
        if not found or time.monotonic() > deadline:
            return
        for pid in found:
            _kill(pid, wanted)
        time.sleep(0.005)  # let them exit before the next look


def _apply(data: bytes, trials: dict[int, str]) -> bytes:
    """Apply the complete ``+``/``-`` lines of ``data``; return the incomplete rest."""
    *lines, rest = data.split(b"\n")
    for line in lines:
        pgid, token = line[1:].split()
        if line[:1] == b"+":
            trials[int(pgid)] = token.decode()
        else:
            trials.pop(int(pgid), None)
    return rest


def _exit_of(parent: int) -> int | None:
    """A pidfd that becomes readable when ``parent`` exits; ``None`` where there is none."""
    try:
        pidfd = os.pidfd_open(parent)
    except ProcessLookupError:
        return os.open(os.devnull, os.O_RDONLY)  # gone already: always readable
    except OSError:
        return None
    if os.getppid() != parent:  # it died before the pidfd was taken, and its pid was reused
        os.close(pidfd)
        return os.open(os.devnull, os.O_RDONLY)
    return pidfd


def watch(parent: int) -> None:
    """Keep the trials announced on stdin until ``parent`` (aorta) exits, then end them."""
    trials: dict[int, str] = {}
    pending = b""
    exited = _exit_of(parent)
    poller = select.poll()
    for fd in (0, exited):
        if fd is not None:
            poller.register(fd, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll()}
        if exited in ready:  # take what aorta wrote last, without waiting for more
            os.set_blocking(0, False)
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(0, 1 << 16):
                    pending = _apply(pending + chunk, trials)
            break
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        pending = _apply(pending + chunk, trials)
    for pgid in trials:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
    end_marked(trials.values())


if __name__ == "__main__":
    watch(int(sys.argv[1]))
