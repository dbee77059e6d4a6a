"""What a cell's folder says about it: which trials have good records, and its cell file,
written when it runs, when it cannot run and when it is left out on purpose."""

from __future__ import annotations

from typing import Any

from aorta_core.engine.cells import Cell, ConfigError, Place
from aorta_core.engine.metrics import safe_text
from aorta_core.engine.progress import error_line, warning_line
from aorta_core.engine.records import (
    CELL_FILE,
    RECORD_NAME,
    BadRecord,
    load_record,
    write_json_atomic,
)


def completed(cell: Cell, index: int) -> bool:
    """Whether trial ``index`` has a good record; a bad one is named and the trial runs again."""
    path = cell.trial_dir(index) / RECORD_NAME
    try:
        record = load_record(path, cell.name, index)
    except FileNotFoundError:
        return False
    except BadRecord as exc:
        warning_line(f"bad record {exc}; the trial runs again")
        return False
    if record.fingerprint != cell.fingerprint:
        raise ConfigError(
            f"{cell.directory} holds trials of another command or collector set; "
            "use a new output=<dir> or delete that cell folder"
        )
    return True


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


def refuse(place: Place, reason: str, **extra: Any) -> dict[str, Any]:
    """A cell that cannot run (a failure of the sweep): one line, and ``cell.json`` says why."""
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
