"""What went wrong in a sweep, for perf.md and report.html to lead with: each reason once (the
trial record's ``error``, the refused cell's ``cell.json`` ``error``), the cells it happened in,
how many of their trials, and the file to read next.

Cells share a row when they share a reason (a payload that fails everywhere is one row, not one
per cell). Only the records of cells with a failed or errored trial are read, at most
:data:`MAX_RECORDS` of them: a report is read, not searched, and each record keeps its own.
A cell's folder is read only as ``cells/<name>`` inside the output, its links never followed
(matrix.json may have been edited).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_core.engine.records import (
    CELL_FILE,
    RECORD_NAME,
    BadRecord,
    TrialOutcome,
    load_record,
)

#: Records read for their reasons, over all cells.
MAX_RECORDS = 2000
#: Reasons listed; the rest are counted.
MAX_REASONS = 20
#: Cells named in one reason's row; the rest are counted.
MAX_CELLS = 5
NOT_RECORDED = ("not recorded: the sweep or its job ended before them; run the same command "
                "again to run them")
#: Characters of a reason shown (a record may hold a long one; record.json keeps it whole).
MAX_REASON = 1000


@dataclass
class Failure:
    """One reason, the cells it happened in, their trials it cost (by verdict, ``not run``,
    ``not recorded``) of ``total``, and the output-relative path to read next."""

    reason: str
    cells: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    log: str | None = None

    @property
    def trials(self) -> str:
        """``2 fail, 1 error of 3 trials``; ``could not run`` for a refused cell."""
        if not self.counts:
            return "could not run"
        return (", ".join(f"{n} {what}" for what, n in self.counts.items())
                + f" of {self.total} trial{'s' if self.total != 1 else ''}")

    def named_cells(self, name: Callable[[str], str]) -> str:
        """The first :data:`MAX_CELLS` cells, each as ``name`` gives it, then ``and N more``."""
        more = len(self.cells) - MAX_CELLS
        return ", ".join(map(name, self.cells[:MAX_CELLS])) + (f" and {more} more"
                                                               if more > 0 else "")


@dataclass(frozen=True)
class WhatWentWrong:
    #: One sentence: what failed of how much, and whether anything is left to compare.
    lead: str
    failures: list[Failure]
    #: Reasons not listed (over :data:`MAX_REASONS`).
    more: int
    #: Failed or errored trials whose records were not read (over :data:`MAX_RECORDS`).
    unread: int


def one_line(text: Any) -> str:
    """A reason as one line (whitespace runs, newlines too, as one space), cut at
    :data:`MAX_REASON` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_REASON else line[:MAX_REASON - 1] + "…"


def cell_folder(output: Path, cell: Mapping[str, Any]) -> Path | None:
    """``output/cells/<name>`` for matrix.json's ``dir``, when it is that and a real folder."""
    parts = str(cell.get("dir") or "").split("/")
    if len(parts) != 2 or parts[0] != "cells" or parts[1] in ("", ".", ".."):
        return None
    folder = output / "cells" / parts[1]
    try:
        return folder if stat.S_ISDIR(os.lstat(folder).st_mode) else None
    except OSError:
        return None


def _records(folder: Path, cell: str) -> Iterator[tuple[str, TrialOutcome]]:
    """(trial folder name, record) of the cell's trials, in index order; links and unreadable
    records are passed over (the matrix names bad records)."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False)
                           and e.name.startswith("trial_") and e.name[6:].isdigit())
    except OSError:
        return
    for name in names:
        try:
            yield name, load_record(folder / name / RECORD_NAME, cell, int(name[6:]),
                                    TrialOutcome)
        except (OSError, BadRecord):
            continue


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _log(folder: Path, trial: str, record: TrialOutcome) -> str:
    """The trial's stderr log when it is a plain file beside its record, else the record."""
    name = record.stderr or ""
    plain = "/" not in name and name not in ("", ".", "..")
    return f"cells/{folder.name}/{trial}/" + (
        name if plain and _regular(folder / trial / name) else RECORD_NAME)


class _Reasons:
    """Failures by reason, in the order first met."""

    def __init__(self) -> None:
        self.by_reason: dict[str, Failure] = {}

    def add(self, reason: str, cell: Mapping[str, Any], total: int = 0, log: str | None = None,
            what: str | None = None, n: int = 1) -> None:
        """Count ``n`` trials as ``what`` (``None``: the cell could not run) under ``reason``,
        in ``cell`` of ``total`` trials."""
        found = self.by_reason.setdefault(reason, Failure(reason, log=log))
        name = str(cell.get("cell"))
        if name not in found.cells:
            found.cells.append(name)
            found.total += total
        if what is not None:
            found.counts[what] = found.counts.get(what, 0) + n


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def what_went_wrong(output: Path, matrix: Mapping[str, Any]) -> WhatWentWrong | None:
    """What went wrong in the sweep at ``output`` (its ``matrix``), or ``None`` when nothing
    did: no failed or errored trial, refused cell or unrecorded trial."""
    reasons = _Reasons()
    budget, unread = MAX_RECORDS, 0
    unusable = set(matrix.get("unreadable_records") or ())
    refused = missing = 0
    for cell in matrix.get("cells") or ():
        if cell.get("skipped"):
            continue
        trials = cell.get("trials") or {}
        total, bad = _int(trials.get("total")), _int(trials.get("fail")) + _int(trials.get("error"))
        if cell.get("error"):
            refused += 1
            folder = cell_folder(output, cell)
            reasons.add(one_line(cell["error"]), cell, log=f"cells/{folder.name}/{CELL_FILE}"
                        if folder and _regular(folder / CELL_FILE) else None)
            continue
        planned = _int(cell.get("planned_trials"))
        if planned > total:
            missing += planned - total
            reasons.add(NOT_RECORDED, cell, planned, what="not recorded", n=planned - total)
        folder = cell_folder(output, cell) if bad else None
        if folder is None:
            unread += bad
            continue
        read = 0
        for trial, record in _records(folder, str(cell["cell"])):
            if read == budget:
                break
            read += 1
            if record.verdict == "pass" or f"{cell['dir']}/{trial}/{RECORD_NAME}" in unusable:
                continue  # what the matrix could not use, it named: not a failure of it
            reason = one_line(record.error or (f"exit code {record.exit_code}"
                                               if record.exit_code is not None else "no reason"))
            reasons.add(reason, cell, total, _log(folder, trial, record), record.verdict)
            bad -= 1
        budget -= read
        unread += max(bad, 0)
    found = list(reasons.by_reason.values())
    if not (found or unread):
        return None
    return WhatWentWrong(_lead(matrix.get("trials") or {}, refused, missing), found[:MAX_REASONS],
                         max(0, len(found) - MAX_REASONS), unread)


def _lead(trials: Mapping[str, Any], refused: int, missing: int) -> str:
    fail, error, passed = (_int(trials.get(k)) for k in ("fail", "error", "pass"))
    parts = []
    if fail or error:
        verb = (f"failed or errored ({fail} fail, {error} error)" if fail and error
                else "failed" if fail else "errored")
        parts.append(f"{fail + error} of {_int(trials.get('total'))} trials {verb}")
    if refused:
        parts.append(f"{refused} cell(s) could not run")
    if missing:
        parts.append(f"{missing} planned trial(s) were not recorded")
    text = "; ".join(parts)
    if not passed:
        return f"Nothing passed: {text}. There is nothing to compare; why, with the file to read:"
    return (f"{text[0].upper()}{text[1:]}. What follows compares the {passed} passing "
            "trial(s) only; why the others failed, with the file to read:")
