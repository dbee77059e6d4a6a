"""What a cell's folder says about it: which trials run (no record, a bad one, or one the retry
policy runs again) and whether its records are of another run, and its cell file, written when
it runs, when it cannot run and when it is left out on purpose."""

from __future__ import annotations

import shlex
from typing import Any

from aorta_core.engine.cells import Cell, Place
from aorta_core.engine.metrics import safe_text
from aorta_core.engine.progress import error_line, warning_line
from aorta_core.engine.records import (
    CELL_FILE,
    RECORD_NAME,
    BadRecord,
    TrialOutcome,
    TrialRecord,
    load_record,
    write_json_atomic,
)
from aorta_core.engine.settings import RetryPolicy


class OtherRun(ValueError):
    """The cell's folder holds trials of another command, environment or collector set: the cell
    is refused and nothing in its folder is touched; the message says what differs."""


def trial_state(cell: Cell, index: int) -> str | None:
    """Why trial ``index`` runs: ``"new"`` (no record), ``"bad"`` (a record that cannot be used,
    named here), or the verdict of a record the retry policy runs again (``"error"``,
    ``"fail"``); ``None`` when its record is kept. :class:`OtherRun` when the record is of
    another run."""
    path = cell.trial_dir(index) / RECORD_NAME
    try:
        record = load_record(path, cell.name, index)
    except FileNotFoundError:
        return "new"
    except BadRecord as exc:
        warning_line(f"bad record {exc}; the trial runs again")
        return "bad"
    if record.fingerprint != cell.fingerprint:
        raise OtherRun(f"{cell.directory} holds trials of another run ({_differences(record, cell)}"
                       "); nothing was changed: choose a new output=<dir>, or delete that cell "
                       "folder to measure the cell again")
    return record.verdict if record.verdict in RetryPolicy(cell.retry).verdicts else None


def unfinished(cell: Cell, indices: range) -> list[int]:
    """The trials among ``indices`` a run would take up (no record, one it cannot read, one of
    another run, a verdict the retry policy runs again), read quietly from how each ended: under
    ``order=rounds`` the rounds where no cell has one are not launched, and a round that is still
    decides, and says, why each of its trials runs."""
    again = RetryPolicy(cell.retry).verdicts
    found = []
    for index in indices:
        try:
            ended = load_record(cell.trial_dir(index) / RECORD_NAME, cell.name, index,
                                TrialOutcome)
        except (OSError, BadRecord):
            found.append(index)
            continue
        if ended.fingerprint != cell.fingerprint or ended.verdict in again:
            found.append(index)
    return found


def kept_unmeasured(cell: Cell, indices: list[int]) -> list[str]:
    """The verdicts (``"error"``, ``"fail"``) of the kept records among ``indices`` that a wider
    retry policy would run again: after a fix, the trials a plain re-run does not redo."""
    found = []
    for index in indices:
        try:
            verdict = load_record(cell.trial_dir(index) / RECORD_NAME, cell.name, index,
                                  TrialOutcome).verdict
        except (OSError, BadRecord):
            continue
        if verdict in RetryPolicy.failed.verdicts:
            found.append(verdict)
    return found


def _shown(values: object) -> str:
    return repr(values) if values is not None else "unset"


def _differences(record: TrialRecord, cell: Cell) -> str:
    """What the recorded trial ran with that ``cell`` does not: the argument, variable or
    collector, ``then`` and ``now``."""
    found = []
    then, now = list(record.argv), [safe_text(a) for a in cell.command]
    if len(then) == len(now):
        found += [f"command argument {i}: {a!r} then, {b!r} now"
                  for i, (a, b) in enumerate(zip(then, now, strict=True)) if a != b]
    elif then != now:
        found.append(f"command: {shlex.join(then)} then, {shlex.join(now)} now")
    env = {safe_text(k): safe_text(v) for k, v in cell.env.items()}
    found += [f"env.{k}: {_shown(record.cell_env.get(k))} then, {_shown(env.get(k))} now"
              for k in sorted(set(record.cell_env) | set(env))
              if record.cell_env.get(k) != env.get(k)]
    if sorted(record.collectors) != sorted(cell.collectors):
        found.append(f"collectors: {','.join(sorted(record.collectors)) or 'none'} then, "
                     f"{','.join(sorted(cell.collectors)) or 'none'} now")
    return "; ".join(found) or "another command, environment or collector set"


def _describe_place(place: Place, **fields: Any) -> None:
    """``cell.json`` of a cell that does not run; never written through a link (it may lead out
    of the output folder). A cell folder that became a link during the sweep (a payload made it)
    is replaced by a real one, so the refusal is recorded and counted; when the folder above it
    is a link too, nothing is written."""
    folder = place.directory
    if folder.parent.is_symlink():
        return
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / CELL_FILE, {"cell": place.name, "axes": dict(place.axes), **fields})


def refuse(place: Place, reason: str, *, say: bool = True, **extra: Any) -> dict[str, Any]:
    """A cell that cannot run (a failure of the sweep): one line (unless ``say`` is false: a
    later round of ``order=rounds`` said it already), and ``cell.json`` says why."""
    if say:
        error_line(f"cell {place.name}: {reason}")
    _describe_place(place, error=reason, **extra)
    return {"cell": place.name, "error": reason}


def skip(place: Place, reason: str, **extra: Any) -> None:
    """A cell left out on purpose (not a failure of the sweep): ``cell.json`` says why."""
    _describe_place(place, error=None, skipped=reason, **extra)


def write_cell_file(cell: Cell, trials: int, **extra: Any) -> None:
    cell.directory.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        cell.directory / CELL_FILE,
        {"cell": cell.name, "axes": dict(cell.axes),
         "command": [safe_text(a) for a in cell.command],
         "collectors": list(cell.collectors), "trials": trials, "error": None,
         "auto": cell.auto.to_json() if cell.auto else None, **extra},
    )
