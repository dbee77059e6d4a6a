"""Tables that read in a terminal, shared by perf.md and the end-of-sweep summary: cells as rows,
or, where that is narrower, cells as columns and the fields (metrics, verdict counts, list ranks)
as rows; cell names shortened to what tells them apart (:func:`short_names`) so that they fit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len

from aorta_core.engine.progress import short_names

#: Narrowest a cell name is shortened to (the end summary kept this since its first version).
MIN_NAME_WIDTH = 16


@dataclass(frozen=True)
class Layout:
    """A table as text: ``header`` and ``rows`` (the first column names the row), whether the
    cells became its columns, whether their names were shortened, and its rendered width."""

    header: list[str]
    rows: list[list[str]]
    transposed: bool
    shortened: bool
    width: int


def widths(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Terminal columns of each table column: its widest text (wide characters count two)."""
    return [max(map(cell_len, column)) for column in zip(header, *rows, strict=True)]


def table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Rendered width of a boxed or Markdown table (``| a | b |``: one separator and a space of
    padding either side of every column), the same for both."""
    return sum(w + 3 for w in widths(header, rows)) + 1


def orient(names: Sequence[str], fields: Sequence[str], values: Sequence[Sequence[str]],
           width: int, *, corner: str = "cell", field_corner: str = "metric") -> Layout:
    """``values[i][j]`` (cell ``names[i]``'s ``fields[j]``) laid out to read in ``width``
    columns: cells as rows, or cells as columns when that renders narrower. Names are shortened
    to what tells them apart where the full ones do not fit; a name that still does not fit is
    the renderer's to wrap, never cut here."""
    names, fields = list(names), list(fields)
    if not names or not fields:
        return Layout([corner, *fields], [[n, *v] for n, v in zip(names, values, strict=True)],
                      False, False, 0)
    rest = table_width(fields, values) - 1
    by_row = short_names(names, max(width - rest - 4, MIN_NAME_WIDTH))
    rows_a = [[n, *v] for n, v in zip(by_row, values, strict=True)]
    first = max(map(cell_len, [field_corner, *fields]))
    widest = max(cell_len(v) for row in values for v in row)
    per_column = max((width - first - 4) // len(names) - 3, MIN_NAME_WIDTH, widest)
    by_column = short_names(names, per_column)
    rows_b = [[field, *(row[j] for row in values)] for j, field in enumerate(fields)]
    a = Layout([corner, *fields], rows_a, False, by_row != names, 0)
    b = Layout([field_corner, *by_column], rows_b, True, by_column != names, 0)
    width_a, width_b = table_width(a.header, a.rows), table_width(b.header, b.rows)
    chosen, chosen_width = (b, width_b) if width_b < width_a else (a, width_a)
    return Layout(chosen.header, chosen.rows, chosen.transposed, chosen.shortened, chosen_width)
