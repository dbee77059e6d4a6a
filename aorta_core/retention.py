"""Prune a trial's files after its metrics were parsed, by verdict (``retain.on_pass`` ...).

Levels, from most to least kept:
- ``full``: keep everything;
- ``summary``: keep the logs and the collectors' small files (<= 1 MiB), delete bulky traces;
- ``log``: keep only the trial's stdout/stderr logs;
- ``none``: keep only the record.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aorta_core.settings import RetainLevel

LEVELS = tuple(level.value for level in RetainLevel)
SUMMARY_MAX_BYTES = 1 << 20


def prune(trial_dir: Path, level: str, artifact_dirs: list[Path], logs: list[Path]) -> list[str]:
    """Delete what ``level`` does not keep; return the deleted paths relative to ``trial_dir``."""
    if level not in LEVELS:
        raise ValueError(f"unknown retention level {level!r}; use one of {', '.join(LEVELS)}")
    deleted: list[str] = []
    if level == "full":
        return deleted
    for folder in artifact_dirs:
        if not folder.exists():
            continue
        if level == "summary":
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                if path.stat().st_size > SUMMARY_MAX_BYTES:
                    path.unlink()
                    deleted.append(str(path.relative_to(trial_dir)))
        else:
            deleted.append(str(folder.relative_to(trial_dir)) + "/")
            shutil.rmtree(folder)
    if level == "none":
        for log in logs:
            if log.exists():
                log.unlink()
                deleted.append(str(log.relative_to(trial_dir)))
    return deleted
