"""Prune a trial's files after its metrics were parsed, by verdict (``retain.on_pass`` ...).

Levels, from most to least kept:
- ``full``: keep everything;
- ``summary``: keep the logs and the collectors' small files (<= 1 MiB), delete bulky traces;
- ``log``: keep only the trial's stdout/stderr logs;
- ``none``: keep only the record.

Logs that are kept are capped to ``log_limit_mb`` (:mod:`aorta_core.engine.logs`). A file that
cannot be deleted or capped (a payload's read-only folder that even its owner cannot change, an
immutable file) is kept with a warning: that costs disk space, never the trial's record or the
sweep. Only a full disk stops the sweep (:func:`aorta_core.api.files.disk_full`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from aorta_core.api.files import disk_full, files_under, remove
from aorta_core.engine import logs as trial_logs
from aorta_core.engine.progress import warning_line
from aorta_core.engine.settings import RetainLevel

LEVELS = tuple(level.value for level in RetainLevel)
SUMMARY_MAX_BYTES = 1 << 20
T = TypeVar("T")


def _bulky(folder: Path) -> list[Path]:
    """Regular files over :data:`SUMMARY_MAX_BYTES` (a link is small: only it would go)."""
    return [p for p in files_under(folder, note=warning_line)
            if stat.S_ISREG((info := os.lstat(p)).st_mode) and info.st_size > SUMMARY_MAX_BYTES]


def _tried(action: Callable[[], T], what: str) -> T | None:
    """``action()``; a failure other than a full disk is a warning naming ``what`` and ``None``."""
    try:
        return action()
    except OSError as exc:
        if disk_full(exc):
            raise
        warning_line(f"could not {what} ({exc.strerror or exc}); it is kept")
        return None


def prune(trial_dir: Path, level: str, artifact_dirs: list[Path], logs: list[Path],
          log_limit_mb: float | None = None) -> list[str]:
    """Delete what ``level`` does not keep, cap the kept logs to ``log_limit_mb`` (``None``: keep
    them whole); return the deleted paths relative to ``trial_dir``."""
    if level not in LEVELS:
        raise ValueError(f"unknown retention level {level!r}; use one of {', '.join(LEVELS)}")
    deleted: list[str] = []

    def delete(path: Path, shown: str) -> None:
        if _tried(lambda: remove(path, trial_dir) or True, f"delete {path}"):
            deleted.append(shown)

    for folder in artifact_dirs if level != "full" else []:
        if not folder.exists():
            continue
        if level == "summary":
            for path in _tried(lambda f=folder: _bulky(f), f"list {folder}") or []:
                delete(path, str(path.relative_to(trial_dir)))
        else:
            delete(folder, str(folder.relative_to(trial_dir)) + "/")
    for log in logs:
        if not log.exists():
            continue
        if level == "none":
            delete(log, str(log.relative_to(trial_dir)))
        else:
            _tried(lambda path=log: trial_logs.cap(path, log_limit_mb), f"cap {log}")
    return deleted
