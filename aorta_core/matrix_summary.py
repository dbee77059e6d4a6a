"""Each cell's ``metrics_summary`` (statistics over its passing trials), and ``matrix.json`` and
``perf.md`` written with them.

A sweep whose metric names are many and sparse (e.g. 2,000 names per trial, distinct per trial)
has one summary per cell and name: as Python dicts they would cost ~500 bytes each, many times
the records' bytes. Beyond :data:`WIDE_LIMIT` table slots they stay in a polars frame per cell
(:class:`ListedSummary`) and reach ``matrix.json`` chunk by chunk; ``perf.md`` then counts them
in one line instead of showing a column per metric.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_core.records import dump_json

STATS = ("mean", "median", "std", "min", "max", "n")
#: perf.md's table of cells x numeric metrics stays one column per metric up to this many slots
#: (or while it is dense: :func:`sparse`); beyond, summaries are listed.
WIDE_LIMIT = 100_000
#: A table (trials or cells x metric names) is sparse with more than this many slots per value.
SLOTS_PER_VALUE = 4


def sparse(slots: int, values: int) -> bool:
    """Whether a table of ``slots`` holding ``values`` is mostly empty: then it is built and
    summarised value by value, since one column per name would cost every slot."""
    return slots > SLOTS_PER_VALUE * values
_CHUNK = 20_000


@dataclass(frozen=True)
class ListedSummary:
    """A cell's ``metrics_summary`` kept as a frame: ``metric`` and :data:`STATS`, the names in
    the order they first appear in the sweep."""

    frame: Any

    def __len__(self) -> int:
        return self.frame.height

    def chunks(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The summary as dicts of at most :data:`_CHUNK` metrics each."""
        import polars as pl

        for part in self.frame.iter_slices(_CHUNK):
            yield dict(zip(part["metric"], part.select(pl.struct(*STATS)).to_series().to_list(),
                           strict=True))


def summaries(long, wall: str, cells: int) -> tuple[dict[str, dict], dict[str, Any]]:
    """(wall time statistics by cell, metrics_summary by cell) from the long form's numeric
    rows of passing trials; a summary is a dict, or a :class:`ListedSummary` when the sweep's
    table of cells x names would be large and sparse."""
    import polars as pl

    value = pl.col("value")
    stats = (long.filter((pl.col("verdict") == "pass") & value.is_not_null())
             .group_by("cell", "metric", maintain_order=True)
             .agg(mean=value.mean(), median=value.median(), std=value.std(), min=value.min(),
                  max=value.max(), n=value.count()))
    is_wall = pl.col("metric") == wall
    walls = {cell: entry for cell, _, entry in _by_metric(stats.filter(is_wall))}
    stats = stats.filter(~is_wall)
    slots = cells * stats["metric"].n_unique()
    if slots <= WIDE_LIMIT or not sparse(slots, stats.height):
        out: dict[str, dict] = {}
        for cell, metric, entry in _by_metric(stats):
            out.setdefault(cell, {})[metric] = entry
        return walls, out
    return (walls, {cell: ListedSummary(frame.drop("cell"))
             for (cell,), frame in stats.partition_by("cell", as_dict=True,
                                                      maintain_order=True).items()})


def column_summaries(wide, wall: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """:func:`summaries` of dense metrics from ``wide`` (``cell``, ``verdict``, then one Float64
    column per numeric metric, wall time first): one aggregation per column."""
    import polars as pl

    numeric = wide.columns[2:]
    aggs = []
    for c in numeric:
        col = pl.col(c)
        aggs += [col.mean().alias(f"{c}\0mean"), col.median().alias(f"{c}\0median"),
                 col.std().alias(f"{c}\0std"), col.min().alias(f"{c}\0min"),
                 col.max().alias(f"{c}\0max"), col.count().alias(f"{c}\0n")]
    walls, out = {}, {}
    for row in (wide.filter(pl.col("verdict") == "pass").group_by("cell").agg(aggs)
                .iter_rows(named=True)):
        summary = {c: {s: row[f"{c}\0{s}"] for s in STATS} for c in numeric if row[f"{c}\0n"]}
        walls[row["cell"]] = summary.pop(wall, None)
        out[row["cell"]] = summary
    return walls, out


def _by_metric(stats) -> Iterator[tuple[str, str, dict[str, Any]]]:
    import polars as pl

    for part in stats.iter_slices(_CHUNK):
        yield from zip(part["cell"], part["metric"],
                       part.select(pl.struct(*STATS)).to_series().to_list(), strict=True)


def write_matrix_json(tmp: Path, matrix: dict[str, Any]) -> None:
    """``matrix`` as :func:`~aorta_core.records.dump_json` writes it, each
    :class:`ListedSummary` formatted chunk by chunk into its place."""
    listed: dict[bytes, ListedSummary] = {}
    cells = []
    for cell in matrix["cells"]:
        summary = cell["metrics_summary"]
        if isinstance(summary, ListedSummary):
            token = f"\0{secrets.token_hex(16)}"
            listed[dump_json(token)] = summary
            cell = {**cell, "metrics_summary": token}
        cells.append(cell)
    text = dump_json({**matrix, "cells": cells})
    with open(tmp, "wb") as fh:
        if not listed:
            fh.write(text)
            return
        at = 0
        for found in re.finditer(b"|".join(map(re.escape, listed)), text):
            fh.write(text[at:found.start()])
            indent = found.start() - text.rfind(b"\n", 0, found.start()) - 1
            indent -= len(b'"metrics_summary": ')
            _write_summary(fh.write, listed[found[0]], indent)
            at = found.end()
        fh.write(text[at:])


def _write_summary(write: Callable[[bytes], object], summary: ListedSummary, indent: int
                   ) -> None:
    """A summary formatted as if at ``indent`` spaces inside :func:`dump_json`'s output."""
    pad = b"\n" + b" " * indent
    first = True
    for chunk in summary.chunks():
        body = dump_json(chunk)[2:-2]  # its members, at two spaces: '{\n' ... '\n}'
        write((b"{" if first else b",") + pad + body.replace(b"\n", pad))
        first = False
    write(b"{}" if first else pad + b"}")
