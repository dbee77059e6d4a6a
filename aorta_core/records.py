"""Trial records on disk: one JSON file per trial, written atomically, read forgivingly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from aorta_core.files import write_atomic

#: Bump when a field changes meaning; readers of older records must keep working.
SCHEMA_VERSION = 1
RECORD_NAME = "record.json"
#: Beside a cell's trial folders: its axes, command and collectors, or why it could not run.
CELL_FILE = "cell.json"


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def dump_json(obj: Any) -> bytes:
    """Pretty, stable JSON (NaN and inf become null rather than invalid JSON)."""
    options = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    return orjson.dumps(obj, default=_default, option=options)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Never a half-written file (:func:`aorta_core.files.write_atomic`)."""
    write_atomic(path, dump_json(obj))


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or ``None`` when it is missing, truncated or not a record."""
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or "verdict" not in record or "schema_version" not in record:
        return None
    return record
