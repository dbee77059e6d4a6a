"""Reading a sweep's ``matrix.json`` and ``matrix.parquet`` back, for the tools that take a run
folder (``aorta compare``, ``aorta report sweep``).

Both files are the user's to edit, copy or break, so they are read like any file aorta did not
write: through the bounded reader (a FIFO cannot hang the tool, a link to ``/dev/zero`` cannot
fill memory), and checked against the shape those tools rely on before anything is used, so a
``[]``, a ``null`` or a cell whose name is a number is one :class:`BadMatrix` naming the file and
the fix, never a traceback. The parquet file is read from its bytes, not its path: polars reads
a path as a glob pattern, and an output folder may be named ``runs[1]``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.files import read_limited
from aorta_core.engine.records import decode_json

MATRIX_JSON = "matrix.json"
MATRIX_PARQUET = "matrix.parquet"
#: The columns of the parquet's long form the tools read (text, the trial's index, and a number
#: in ``value``).
_LONG = ("cell", "verdict", "metric", "trial", "value")


class BadMatrix(ValueError):
    """A matrix file that cannot be used; the message names it and how to rebuild it."""


def _bad(output: Path, name: str, why: str) -> BadMatrix:
    return BadMatrix(f"{output / name} is not a {name} aorta can read ({why}); rebuild it with "
                     f"aorta matrix {output}")


def _refused(output: Path, name: str, exc: OSError) -> BadMatrix:
    """:func:`_bad` for a file the bounded reader refused (its reason without the path)."""
    return _bad(output, name, str(exc).removeprefix(f"{output / name} ").removeprefix("is "))


class _Environment(msgspec.Struct):
    """``null`` where the records did not say (``aorta matrix`` writes what they hold)."""

    gpus: list[dict[str, Any]] | None = None
    packages: dict[str, Any] | None = None
    collectors: dict[str, Any] | None = None


class _Cell(msgspec.Struct):
    cell: str
    collectors: list[str] = []
    error: str | None = None
    trials: dict[str, int] = {}


class _Matrix(msgspec.Struct):
    """What the tools read of ``matrix.json``; any other field is left as it is."""

    cells: list[_Cell]
    environments: list[_Environment] = []


def load_matrix(output: Path) -> dict[str, Any]:
    """``<output>/matrix.json`` as plain data, checked against :class:`_Matrix`;
    :class:`BadMatrix` when it is missing, not a regular file, too large or of another shape."""
    path = output / MATRIX_JSON
    try:
        data = decode_json(read_limited(path))
        msgspec.convert(data, _Matrix)
    except FileNotFoundError:
        raise BadMatrix(f"{output} holds no readable {MATRIX_JSON}; pass a sweep's output "
                        f"folder, or build it with aorta matrix {output}") from None
    except OSError as exc:
        raise _refused(output, MATRIX_JSON, exc) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _bad(output, MATRIX_JSON, str(exc)) from None
    return data


def passing_values(output: Path):
    """The rows of ``<output>/matrix.parquet`` of passing trials that hold a number, as a polars
    frame of cell, verdict, metric, trial and value; :class:`BadMatrix` when the file cannot be read
    or lacks those columns."""
    import polars as pl

    path = output / MATRIX_PARQUET
    try:
        long = pl.read_parquet(io.BytesIO(read_limited(path)), columns=list(_LONG))
    except FileNotFoundError:
        raise BadMatrix(f"{output} holds no {MATRIX_PARQUET}; build it with aorta matrix "
                        f"{output}") from None
    except OSError as exc:
        raise _refused(output, MATRIX_PARQUET, exc) from None
    except (Exception, pl.exceptions.PanicException) as exc:  # polars on damaged bytes
        raise _bad(output, MATRIX_PARQUET, type(exc).__name__) from None
    types = long.schema
    text = all(types[c] in (pl.String, pl.Null) for c in _LONG[:3])
    numbers = all(types[c] == pl.Null or types[c].is_numeric() for c in _LONG[3:])
    if not (text and numbers and not types["trial"].is_float()):
        raise _bad(output, MATRIX_PARQUET, f"columns {dict(types)}: cell, verdict and metric "
                   "must be text, trial a whole number, value a number")
    return long.cast({"trial": pl.Int64, "value": pl.Float64}).filter(
        (pl.col("verdict") == "pass") & pl.col("value").is_not_null())
