"""Read ncu's raw page (``--csv --page raw``) into one row per profiled launch, in aorta's units.

The file's first line names the columns (``"ID","Process ID",...,"Kernel Name",...`` then one
column per metric), the second holds each metric's unit, then one line per profiled launch.
Values are quoted strings that may carry thousands separators (``"1,234,567"``) or ``n/a``.
Units are honoured whatever ``--print-units`` made them (``ns``, ``us``, ``ms``, ``s`` as ncu
2025.3.1 prints them, the long spellings ``nsecond`` ... ``second`` too, and ``%``).
The page is read through aorta's bounded reader (regular files only, inside the artifact folder,
within ``read_limit_mb``) and blank or whitespace-only lines are dropped before polars sees them:
they are not launches. Functions here raise on unreadable input; :mod:`aorta_ncu.parse` turns
that into warnings.
"""

from __future__ import annotations

import codecs
import io
import warnings
from pathlib import Path

import polars as pl

from aorta_core.api import read_limited
from aorta_ncu.counters import HARDWARE, TIME

NAME = "Kernel Name"
#: Time units ncu prints (long and short spellings) -> milliseconds.
MS_PER_UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3,
               "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
PERCENT = "%"


def _table_lines(data: bytes) -> bytes:
    """The page from its ``"ID",...`` header on (ncu may print lines before it, 1,000 at most),
    without blank or whitespace-only lines, nor a leading UTF-8 BOM."""
    lines = [line for line in data.splitlines(keepends=True) if line.strip()]
    if lines:
        lines[0] = lines[0].removeprefix(codecs.BOM_UTF8)
    start = next((i for i, line in enumerate(lines[:1001]) if line.startswith(b'"ID",')), None)
    if start is None:
        raise ValueError('no ncu raw-page header (a line starting with "ID",)')
    return b"".join(lines[start:])


def _number(column: str) -> pl.Expr:
    """Quoted ncu text -> float; ``n/a``, blanks and non-finite values -> null."""
    value = (pl.col(column).str.strip_chars().str.replace_all(",", "", literal=True)
             .cast(pl.Float64, strict=False))
    return pl.when(value.is_finite()).then(value)


def _scaled(column: str, unit: str, factors: dict[str, float]) -> pl.Expr | None:
    if unit not in factors:
        warnings.warn(f"ncu: {column} is in {unit!r}, not a unit aorta reads "
                      f"({', '.join(repr(u) for u in factors)}); its metrics are omitted",
                      stacklevel=4)
        return None
    return _number(column) * factors[unit]


def read_launches(path: Path, root: Path) -> pl.DataFrame:
    """``name``, ``time_ms`` and one column per :data:`HARDWARE` key ncu reported, a row a launch.

    A quantity whose column is absent or whose unit is not understood is left out (with a
    warning for the unit); a missing or unreadable value is null. ``path`` must be a regular
    file inside ``root`` once links are resolved (``aorta_core.api.FileRefused`` otherwise).
    """
    frame = pl.read_csv(io.BytesIO(_table_lines(read_limited(path, root))), infer_schema=False,
                        truncate_ragged_lines=True)
    if NAME not in frame.columns:
        raise ValueError(f'no "{NAME}" column: not an ncu raw page')
    if frame.height == 0 or frame["ID"][0] not in (None, ""):
        raise ValueError("no units row under the header: not an ncu --csv --page raw export")
    units = {c: (u or "").strip() for c, u in frame.row(0, named=True).items()}
    columns = [pl.col(NAME).alias("name")]
    if TIME in frame.columns:
        time = _scaled(TIME, units[TIME], MS_PER_UNIT)
        if time is not None:
            columns.append(time.alias("time_ms"))
    else:
        warnings.warn(f"ncu: {path.name} has no {TIME} column; time metrics omitted", stacklevel=3)
    for key, names in HARDWARE.items():
        found = next((n for n in names if n in frame.columns), None)
        if found is not None:
            value = _scaled(found, units[found], {PERCENT: 1.0})
            if value is not None:
                columns.append(value.alias(key))
    return frame.slice(1).select(columns)
