"""Folders a payload swapped while it ran. aorta writes into the trial's folders after the payload
has ended (artifacts gathered, the record, the timeline): a payload that put a link (or a file)
in place of its trial folder, its cell's, ``cells`` or a collector's folder would have those
written, and read, wherever the link leads. Each such folder is checked once the payload has
ended and replaced by a new, real one; the link itself is removed (it holds nothing) and a file
the payload left in its place is moved aside, never deleted.
"""

from __future__ import annotations

import os
from pathlib import Path

from aorta_core.api.files import temporary_beside


class OutputSwapped(RuntimeError):
    """The output folder itself is no longer the one the sweep writes: nothing more can be."""


def _identity(path: Path) -> tuple[int, int, bool] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, path.is_symlink()


def _where(path: Path) -> str:
    if path.is_symlink():
        return f"a link to {os.readlink(path)}"
    return "another folder" if path.is_dir() else "a file"


def make_real(folder: Path) -> str:
    """Put a new, empty folder where ``folder`` was swapped; say what stood there."""
    found = _where(folder)
    if folder.is_symlink():
        folder.unlink()
    elif os.path.lexists(folder):
        os.rename(folder, temporary_beside(folder))
    folder.mkdir(parents=True)
    return found


class TrialFolders:
    """The output, ``cells``, the cell's and the trial's folder as they were before the payload
    ran, to tell afterwards whether it swapped one of them."""

    def __init__(self, trial_dir: Path) -> None:
        self.chain = [trial_dir.parents[2], trial_dir.parents[1], trial_dir.parent, trial_dir]
        self.before = [_identity(p) for p in self.chain]

    def swapped(self) -> str | None:
        """Why the trial's folders are not the ones it started in (each replaced by a real one
        again); ``None`` when they are. :class:`OutputSwapped` when the output itself is."""
        for folder, before in zip(self.chain, self.before, strict=True):
            if _identity(folder) == before:
                continue
            if folder == self.chain[0]:
                raise OutputSwapped(f"the payload moved or replaced the output folder {folder}; "
                                    "aorta writes nothing through a link, so the sweep stops: "
                                    "run the payload where it cannot reach the output")
            found = make_real(folder)
            self.chain[-1].mkdir(parents=True, exist_ok=True)
            return (f"the payload replaced {folder} with {found}; aorta reads and writes nothing "
                    "through it, so this trial's files are not kept")
        return None
