"""A trial's kernel and op table: every collector's ``kernel_table`` rows in ``kernels.parquet``.

The hook runs in the same isolated child as the collector's ``parse_metrics`` (one fork per
collector and trial, as before), right after it, so a collector may reuse what its parse read.
Its rows are checked there: a bad row costs that collector's table and one warning, never its
metrics or the trial. The same child then writes the file atomically with the rows of every
collector so far (earlier collectors' rows came with the fork), so aorta's own process never
starts polars' threads (:mod:`aorta_core.engine.isolation` explains why it must not), and a
collector whose hook hangs or crashes leaves the file of the collectors before it.
"""

from __future__ import annotations

import io
import math
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_core.api.contracts import KERNEL_KINDS, KernelRow
from aorta_core.api.files import write_atomic
from aorta_core.engine.records import KernelsRecord

KERNELS_NAME = "kernels.parquet"
#: The file's columns, in order.
COLUMNS = ("collector", "name", "key", "kind", "step", "calls", "total_ms")
#: Rows taken from one collector of one trial: a table beyond it is a runaway hook.
MAX_ROWS = 5_000_000


def rebuild_command(output: Path | str) -> str:
    """The command that writes every trial's kernel table of the sweep at ``output``, quoted to
    be pasted into a shell."""
    return f"aorta parse {shlex.quote(str(output))} --kernels"


def row_problem(row: Any) -> str | None:
    """Why ``row`` is not a usable :class:`KernelRow`, in a few words, or ``None``."""
    if type(row) is not KernelRow:
        return f"a {type(row).__name__}, not a KernelRow"
    if type(row.name) is not str or not row.name:
        return f"name {row.name!r:.60} (must be non-empty text)"
    if type(row.calls) is not int or row.calls < 0:
        return f"calls {row.calls!r:.40} of {row.name!r:.60} (must be an int >= 0)"
    if type(row.total_ms) not in (int, float) or not math.isfinite(row.total_ms) \
            or row.total_ms < 0:
        return f"total_ms {row.total_ms!r:.40} of {row.name!r:.60} (must be a finite number >= 0)"
    if row.kind not in KERNEL_KINDS:
        return f"kind {row.kind!r:.40} of {row.name!r:.60} (must be one of {KERNEL_KINDS})"
    if row.step is not None and (type(row.step) is not int or row.step < 0):
        return f"step {row.step!r:.40} of {row.name!r:.60} (must be None or an int >= 0)"
    return None


def checked_rows(collector: str, returned: Any) -> list[tuple] | None:
    """In the hook's process: ``returned`` as file rows, or ``None`` (one warning) when it or
    any of its rows is unusable."""
    from aorta_core.api.kernel_names import demangle, kernel_key

    if returned is None:
        return None
    try:
        rows = []
        for row in returned:
            problem = row_problem(row)
            if problem is None and len(rows) >= MAX_ROWS:
                problem = f"more than {MAX_ROWS} rows"
            if problem is not None:
                warnings.warn(f"kernel_table returned {problem}; this trial's {collector} "
                              "table is left out", stacklevel=1)
                return None
            rows.append((collector, demangle(row.name), kernel_key(row.name), row.kind,
                         row.step, row.calls, float(row.total_ms)))
    except Exception as exc:  # the hook raised while its iterable was read
        warnings.warn(f"kernel_table failed: {type(exc).__name__}: {exc}"[:300] +
                      f"; this trial's {collector} table is left out", stacklevel=1)
        return None
    return rows


def write_table(path: Path, rows: list[tuple]) -> None:
    """``rows`` as ``kernels.parquet`` at ``path``, atomically."""
    import polars as pl

    schema = {"collector": pl.String, "name": pl.String, "key": pl.String, "kind": pl.String,
              "step": pl.Int64, "calls": pl.Int64, "total_ms": pl.Float64}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_atomic(path, buffer.getvalue())


def has_kernel_table(registry: Any, name: str) -> bool:
    """Whether collector ``name`` implements ``kernel_table``."""
    hook = getattr(registry.manager.hook, "kernel_table", None)
    return hook is not None and name in {i.plugin_name for i in hook.get_hookimpls()}


@dataclass
class KernelTables:
    """One trial's table as its collectors add to it (aorta's side)."""

    path: Path
    rows: list[tuple] = field(default_factory=list)
    #: Rows in the file as last written; ``None``: no file.
    written: int | None = None

    def add(self, registry: Any, name: str, folder: Path, options: Any) -> list[tuple] | None:
        """In the hook's process, after ``parse_metrics``: this collector's rows (hook called,
        rows checked), once the file holds them after the earlier collectors' rows; ``None``
        when it added nothing."""
        if not has_kernel_table(registry, name):
            return None
        try:
            returned = registry.call(name, "kernel_table", artifact_dir=folder, options=options)
            rows = checked_rows(name, returned)
        except Exception as exc:
            warnings.warn(f"kernel_table failed: {type(exc).__name__}: {exc}"[:300] +
                          f"; this trial's {name} table is left out", stacklevel=1)
            return None
        if not rows:
            return None
        write_table(self.path, self.rows + rows)
        return rows

    def took(self, rows: list[tuple] | None) -> None:
        """In aorta: the rows a collector's child added to the file (:meth:`add`)."""
        if rows:
            self.rows += rows
            self.written = len(self.rows)

    def record(self) -> KernelsRecord | None:
        """The record's ``kernels`` field, for the table once it lies at :data:`KERNELS_NAME`."""
        return None if self.written is None else KernelsRecord(KERNELS_NAME, self.written)
