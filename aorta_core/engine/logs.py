"""A trial's stdout.log and stderr.log, capped once the payload has ended.

A payload that prints without end would otherwise keep gigabytes per trial. What matters in a log is
its beginning (the command, the configuration, the first warning) and its end (the error, the last
results), so ``log_limit_mb`` keeps that many MiB: the first half and the last half, joined by one
line that says how many bytes were cut. The log is copied piecewise in the kernel (``sendfile``),
never read into memory, into a new file that replaces the old one atomically; a link is never
followed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path
from typing import Any, TextIO

from aorta_core.api.files import write_atomic

#: Default of the ``log_limit_mb`` setting: 32 MiB of head and 32 MiB of tail per log.
DEFAULT_LOG_LIMIT_MB = 64


def _copy(source: int, target: int, offset: int, count: int) -> None:
    while count > 0:
        sent = os.sendfile(target, source, offset, count)
        if sent == 0:  # the file shrank meanwhile: keep what there is
            return
        offset, count = offset + sent, count - sent


def cap(path: Path, limit_mb: float | None) -> int:
    """Keep the first and last ``limit_mb / 2`` MiB of the log at ``path`` with a note between
    them; return the bytes cut (0: the log fits, is absent, is not a regular file, or
    ``limit_mb`` is ``None``)."""
    if limit_mb is None:
        return 0
    try:
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return 0
    try:
        info = os.fstat(source)
        limit = int(limit_mb * (1 << 20))
        if not stat.S_ISREG(info.st_mode) or info.st_size <= limit:
            return 0
        head = limit // 2
        tail = limit - head
        cut = info.st_size - head - tail
        note = (f"\n... [aorta: {cut} bytes cut; log_limit_mb={limit_mb:g} keeps head and tail] "
                "...\n").encode()

        def write(tmp: Path) -> None:
            target = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                _copy(source, target, 0, head)
                os.write(target, note)
                _copy(source, target, head + cut, tail)
            finally:
                os.close(target)

        write_atomic(path, write)
        return cut
    finally:
        os.close(source)


class JobLog(logging.FileHandler):
    """Hydra's job log (``<cell>/aorta.log``, config.yaml's ``hydra.job_logging``) that is never
    opened through a link below ``root`` (the output): Hydra opens it before aorta can refuse a
    cell folder that is a link. A link or FIFO at the log's name is replaced by a fresh file; a
    link among its folders sends the log nowhere (that cell is refused anyway)."""

    def __init__(self, filename: str, root: str, **kwargs: Any) -> None:
        self.root = Path(root).absolute()
        super().__init__(filename, **kwargs)

    def _open(self) -> TextIO:
        path = Path(self.baseFilename)
        if not path.is_relative_to(self.root):  # a log the user placed elsewhere on purpose
            return super()._open()
        if any(folder.is_symlink() for folder in path.parents
               if folder.is_relative_to(self.root) and folder != self.root):
            return open(os.devnull, "a", encoding=self.encoding)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)
