"""Earlier attempts of a trial. A recorded trial that runs again (the retry policy, or a record
that cannot be read) first moves everything its last attempt left (record, logs, artifacts) into
``trial_NNN/attempts/<n>/``: a re-run replaces a measurement, it never deletes one.
"""

from __future__ import annotations

import os
from pathlib import Path

from aorta_core.api.files import temporary_beside

#: The folder of a trial that keeps its earlier attempts, one numbered folder each.
ATTEMPTS_DIR = "attempts"


def _last(folder: Path) -> int:
    """The highest attempt number kept in ``folder`` (0: none, or no real folder there)."""
    if folder.is_symlink() or not folder.is_dir():
        return 0
    with os.scandir(folder) as entries:
        return max((int(e.name) for e in entries if e.name.isdigit()), default=0)


def _attempts_folder(trial_dir: Path) -> Path:
    """``trial_dir/attempts`` as a real folder. Anything else of that name (a payload's file or
    link) belongs to the attempt being kept: it is moved aside first, never followed."""
    folder = trial_dir / ATTEMPTS_DIR
    if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
        os.rename(folder, temporary_beside(folder))
    folder.mkdir(exist_ok=True)
    return folder


def start_attempt(trial_dir: Path, record_name: str) -> int:
    """The number of the attempt about to run in ``trial_dir``. When the folder holds a record
    (a trial run again), everything its last attempt left but the earlier attempts is first moved
    into the next ``attempts/<n>/``: renames only, nothing copied, deleted or followed through a
    link. What an attempt left without a record (it was interrupted) measured nothing: the
    trial's fresh start clears it as before."""
    if trial_dir.is_symlink() or not trial_dir.is_dir():
        return 1
    if not os.path.lexists(trial_dir / record_name):
        return _last(trial_dir / ATTEMPTS_DIR) + 1
    folder = _attempts_folder(trial_dir)
    kept = folder / str(_last(folder) + 1)
    kept.mkdir()
    for name in sorted(os.listdir(trial_dir)):
        if name != ATTEMPTS_DIR:
            os.rename(trial_dir / name, kept / name)
    return int(kept.name) + 1
