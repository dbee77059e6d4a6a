"""Why a payload failed, in one line: its real error, not the last line it happened to print.

The last stderr line of a failed run is often noise: a ruler of ``=``, torchrun's
``ChildFailedError`` summary, a log or warning line (glog's, or Kineto's as a profiler stops).
This reads the tail of stderr the way a person would: the root-cause rank of torchrun's summary,
that rank's ``[rankN]:`` lines, the exception line that ends the last Python traceback, and only
then the last meaningful line.
Only text counts: colour codes and NUL bytes are dropped, and a line still holding control or
undecodable bytes (a binary blob written to stderr) is skipped, so the reason is one clean line or
none (then the exit status alone).
"""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

#: Enough for the last few tracebacks; a multi-GB log is never read whole.
TAIL_BYTES = 256 * 1024
MAX_REASON = 300

_RANK_PREFIX = re.compile(r"^\[(?:default)?rank(\d+)\]:\s?")
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):\s*\n(.*?)(?:\n=+|\Z)", re.S)
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.M)
_SUMMARY_TRACEBACK = re.compile(r"^\s*traceback\s*:\s*(.*)", re.M | re.S)
_SUMMARY_SIGNAL = re.compile(r"Signal \d+ \((SIG\w+)\) received by PID")
#: ``ValueError: x``, ``torch.distributed.DistBackendError: x``, ``KeyboardInterrupt``.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?::\s|:?$)")
_CARETS = re.compile(r"^[\^~ ]+")
#: What the C++ runtime prints before it aborts: ``terminate called without an active exception``
#: (a thread left running at exit: torch's teardown of a gloo job, now and then) or ``terminate
#: called after throwing an instance of 'T'`` and ``  what():  <message>`` on the next line.
_TERMINATE = re.compile(r"terminate called (?:after throwing an instance of '([^']+)'|(.+))")
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)")
#: glibc's heap checks, before they abort: ``free(): double free detected in tcache 2``,
#: ``malloc(): unsorted double linked list corrupted``, ``double free or corruption (!prev)``.
_HEAP = re.compile(r"^(?:(?:malloc|free|realloc|calloc|munmap_chunk)\(\): |double free or "
                   r"corruption|corrupted (?:size|double-linked))")
_COLOUR = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: What no line of text holds: C0/C1 controls (tab and line ends aside), U+FFFD for bad UTF-8.
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]")
_NOISE = (
    re.compile(r"^[=\-*#~_.+ ]{3,}$"),  # rulers and banners
    re.compile(r"^\[?[WIEF]\d{4} \d\d:\d\d:\d\d"),  # glog lines (torchrun, NCCL, c10)
    # Kineto's log lines, printed as torch.profiler stops, after the workload's error:
    # ``USDT:2026-12-05 12:41:02 28720:28720 SyncActivityProfilerHandler.cpp:59] profiler_stop``
    re.compile(r"^[A-Z]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \S+:\d+\] "),
    re.compile(r"^\S+:\d+: \w*Warning: "),  # warnings.warn output
    re.compile(r"^\s*warnings\.warn\("),
    re.compile(r"Setting OMP_NUM_THREADS environment variable"),
    re.compile(r"^To enable traceback see: "),
)


def read_tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of a regular file as text; "" for a link, a FIFO or no file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        fh.seek(max(0, fh.seek(0, os.SEEK_END) - size))
        return fh.read(size).decode(errors="replace")


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` without colour codes or NUL bytes; a line that holds other control
    or undecodable bytes (binary output) becomes empty."""
    lines = _COLOUR.sub("", text).replace("\0", "").splitlines()
    return ["" if _BINARY.search(line) else line for line in lines]


def _is_noise(line: str) -> bool:
    return not line.strip() or any(p.search(line) for p in _NOISE)


def _continues_message(line: str) -> bool:
    """A line of a multi-line exception message (not a frame, caret marker, log or new block)."""
    return (bool(line.strip()) and not line[0].isspace() and not _CARETS.match(line)
            and not line.startswith(("Traceback (", "During handling", "The above exception"))
            and not _is_noise(line))


def _summarise(message: list[str]) -> str:
    """The first line, or ``Type: <line after "Last error:">`` for NCCL-style messages."""
    for i, line in enumerate(message[:-1]):
        if line.strip() == "Last error:":
            return f"{message[0].split(':', 1)[0]}: {message[i + 1].strip()}"
    return message[0].strip()


def last_exception(lines: list[str]) -> str | None:
    """The exception that ends the last Python traceback in ``lines`` (interleaved ones too)."""
    found, seen_traceback, i = None, False, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Traceback (most recent call last):"):
            seen_traceback = True
        elif seen_traceback and _EXCEPTION.match(line):
            message = [line]
            while i + 1 < len(lines) and _continues_message(lines[i + 1]):
                i += 1
                message.append(lines[i])
            found = _summarise(message)
        i += 1
    return found


def native_abort(lines: list[str]) -> str | None:
    """The C++ runtime's or glibc's last words before an abort, in one line
    (``std::runtime_error: CUDA error: ...``, ``terminate called without an active exception``,
    ``free(): double free detected in tcache 2``), or ``None``."""
    for i in range(len(lines) - 1, -1, -1):
        if _HEAP.match(lines[i]):
            return lines[i].strip()
        found = _TERMINATE.search(lines[i])
        if found is None:
            continue
        if found.group(2):
            return f"terminate called {found.group(2).strip()}"
        what = _WHAT.match(lines[i + 1]) if i + 1 < len(lines) else None
        return f"{found.group(1)}: {what.group(1).strip()}" if what else \
            f"uncaught {found.group(1)}"
    return None


def _root_cause(text: str) -> tuple[int | None, str | None]:
    """Rank and error of torchrun's ``Root Cause`` block, when there is one: the exception of
    its inline traceback, or the signal that ended the rank (a native crash; the other ranks'
    tracebacks then only show that a peer went away)."""
    block = _ROOT_CAUSE.search(text)
    if block is None:
        return None, None
    rank = _SUMMARY_RANK.search(block.group(1))
    trace = _SUMMARY_TRACEBACK.search(block.group(1))
    lines = trace.group(1).splitlines() if trace else []
    error = last_exception(lines) if lines else None
    if error is None and lines and (killed := _SUMMARY_SIGNAL.match(lines[0])):
        error = f"killed by {killed.group(1)}"
    return (int(rank.group(1)) if rank else None), error


def _split_ranks(lines: list[str]) -> tuple[dict[int, list[str]], list[str]]:
    ranks: dict[int, list[str]] = {}
    plain = []
    for line in lines:
        match = _RANK_PREFIX.match(line)
        if match:
            ranks.setdefault(int(match.group(1)), []).append(line[match.end():])
        else:
            plain.append(line)
    return ranks, plain


def _before_launcher_traceback(lines: list[str]) -> list[str]:
    """Drop torchrun's own traceback (ending in ``ChildFailedError``) and what follows it."""
    for i, line in enumerate(lines):
        if "ChildFailedError" in line and not line[:1].isspace():
            start = max((j for j in range(i) if lines[j].startswith("Traceback (most recent")),
                        default=i)
            return lines[:start]
    return lines


def reason(stderr_text: str) -> str | None:
    """The payload's real error in one line (``rank 1: RuntimeError: ...``), or ``None``."""
    lines = text_lines(stderr_text)
    root_rank, root_exception = _root_cause("\n".join(lines))
    ranks, plain = _split_ranks(_before_launcher_traceback(lines))
    text = root_exception
    if text is not None and text.startswith("killed by "):  # a native crash: what it said
        native = native_abort(ranks.get(root_rank, [])) or native_abort(plain)
        text = f"{text} ({native})" if native else text
    if text is None and root_rank in ranks:
        text = last_exception(ranks[root_rank])
    if text is None:
        text = last_exception(plain)
    if text is None:
        for rank in sorted(ranks):
            text = last_exception(ranks[rank])
            if text is not None:
                root_rank = rank
                break
    if text is None:
        text = native_abort(plain)
    if text is None:
        text = next((ln.strip() for ln in reversed(plain) if not _is_noise(ln)), None)
    if text is None:
        return None
    prefix = f"rank {root_rank}: " if root_rank is not None and (ranks or root_exception) else ""
    return (prefix + text)[:MAX_REASON]


def describe(returncode: int, stderr_path: Path) -> str:
    """``exit code N: <reason>`` (or the signal that ended the run) for the trial record."""
    if returncode < 0:
        try:
            head = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            head = f"killed by signal {-returncode}"
    else:
        head = f"exit code {returncode}"
    why = reason(read_tail(stderr_path))
    return f"{head}: {why}" if why else head
