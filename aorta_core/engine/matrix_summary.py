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

from aorta_core.engine.records import dump_json

STATS = ("mean", "median", "std", "min", "max", "n")
#: The table of cells x numeric metrics (perf.md, report.html) keeps a column per metric up to
#: this many slots, or while it is dense (:func:`table_fits`); beyond, summaries are listed.
WIDE_LIMIT = 100_000
#: A table (trials or cells x metric names) is sparse with more than this many slots per value.
SLOTS_PER_VALUE = 4


def sparse(slots: int, values: int) -> bool:
    """Whether a table of ``slots`` holding ``values`` is mostly empty: then it is built and
    summarised value by value, since one column per name would cost every slot."""
    return slots > SLOTS_PER_VALUE * values


def table_fits(cells: int, names: int, entries: int) -> bool:
    """Whether a table of ``cells`` x metric ``names`` holding ``entries`` statistics may have
    a column per name (perf.md, report.html): small, or mostly filled."""
    slots = cells * names
    return slots <= WIDE_LIMIT or not sparse(slots, entries)


_CHUNK = 20_000


@dataclass(frozen=True)
class ListedSummary:
    """A cell's ``metrics_summary`` kept as two frames: ``alone`` (``metric``, ``value``) for the
    metrics with one value, whose statistics are that value (most, when names are sparse), and
    ``grouped`` (``metric`` and :data:`STATS`) for the rest; each in the order the names first
    appear in the cell, ``alone`` first."""

    alone: Any
    grouped: Any

    def __len__(self) -> int:
        return self.alone.height + self.grouped.height

    def json_members(self, separator: str) -> Iterator[str]:
        """The summary's members as JSON text (``"<metric>": {"mean": ..., "n": ...}``), at
        most :data:`_CHUNK` to a string, joined by ``separator``: formatted by polars, since a
        Python dict per metric would cost more than the rest of the matrix. Infinities (a mean
        that overflowed) become null, as :func:`~aorta_core.engine.records.dump_json` makes them."""
        import polars as pl

        def finite(column: str):
            return pl.when(pl.col(column).is_finite()).then(pl.col(column))

        name = pl.struct(pl.col("metric").alias("k")).struct.json_encode().str.slice(5) \
            .str.strip_suffix("}")
        one = finite("value")
        alone = pl.struct(mean=one, median=one, std=pl.lit(None, pl.Float64), min=one, max=one,
                          n=pl.lit(1, pl.UInt32))
        grouped = pl.struct(*(finite(s).alias(s) for s in STATS[:-1]), "n")
        for frame, stats in ((self.alone, alone), (self.grouped, grouped)):
            member = pl.concat_str(name, pl.lit(": "), stats.struct.json_encode())
            for part in frame.iter_slices(_CHUNK):
                yield part.select(member.str.join(separator)).item()


def summaries(metrics, meta, wall: str) -> tuple[dict[str, dict], dict[str, Any]]:
    """(wall time statistics by cell, metrics_summary by cell) over the passing trials, from the
    long form's numbers (``metrics``: ``row``, ``metric``, ``value``) and ``meta`` (one row per
    trial: ``cell``, ``verdict``, ``wall``). A summary is a dict, or a :class:`ListedSummary`
    when the sweep's table of cells x names would be large and sparse."""
    import polars as pl

    walls, _ = column_summaries(meta.select("cell", "verdict", wall), wall)
    cells = meta["cell"].unique(maintain_order=True)
    names = cells.to_list()
    code = meta["cell"].replace_strict(cells, pl.int_range(cells.len(), dtype=pl.UInt32,
                                                            eager=True))
    keep = (meta["verdict"] == "pass").gather(metrics["row"]) & metrics["value"].is_not_null()
    numbers = metrics.filter(keep).select("row", "metric", "value")
    numbers = numbers.select(code.gather(numbers["row"]).alias("cell"), "metric", "value") \
        .with_row_index("at")
    value = pl.col("value")
    numbers = numbers.with_columns(alone=_alone(numbers))
    grouped = (numbers.filter(~pl.col("alone")).group_by("cell", "metric")
               .agg(pl.col("at").first(), mean=value.mean(), median=value.median(),
                    std=value.std(), min=value.min(), max=value.max(), n=value.count())
               .select("at", "cell", "metric", *STATS))
    entries = numbers["alone"].sum() + grouped.height
    if not table_fits(cells.len(), numbers.select(pl.col("metric").approx_n_unique()).item(),
                      entries):
        alone = numbers.filter(pl.col("alone")).select("cell", "metric", "value")
        del numbers
        if not alone["cell"].is_sorted():  # each cell's trials are read together: never
            alone = alone.sort("cell", maintain_order=True)
        ends = alone["cell"].search_sorted(pl.int_range(1, len(names) + 1, eager=True),
                                           side="left").to_list()
        grouped_by = grouped.sort("at").drop("at").partition_by("cell", as_dict=True,
                                                                include_key=False)
        no_grouped = grouped.clear().drop("at", "cell")
        out = {}
        for cell, (start, end) in enumerate(zip([0, *ends], ends, strict=False)):
            part = alone.slice(start, end - start).drop("cell")  # a view, not a copy
            if part.height or (cell,) in grouped_by:
                out[names[cell]] = ListedSummary(part, grouped_by.get((cell,), no_grouped))
        return walls, out
    numbers = numbers.filter(pl.col("alone"))
    stats = pl.concat([
        numbers.select("at", "cell", "metric", mean=value, median=value,
                       std=pl.lit(None, pl.Float64), min=value, max=value,
                       n=pl.lit(1, pl.UInt32)), grouped]).sort("at")
    out: dict[str, dict] = {}
    for cell, metric, entry in _by_metric(stats):
        out.setdefault(names[cell], {})[metric] = entry
    return walls, out


def _alone(numbers):
    """Which rows of ``numbers`` are the only value of their cell (a ``UInt32`` code) and metric,
    found through a sorted hash of the pair (a hash table of millions of pairs costs several
    times the values). Two pairs whose hashes collide are left to the grouping, which gives one
    value the same statistics."""
    import numpy as np
    import polars as pl

    key = numbers["cell"].to_numpy().astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    key ^= numbers["metric"].hash().to_numpy()
    ordered = np.sort(key)
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    return pl.Series(np.isin(key, shared, invert=True) if shared.size else
                     np.ones(key.size, dtype=bool))


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
    """``matrix`` as :func:`~aorta_core.engine.records.dump_json` writes it, each
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
    pad = "\n" + " " * (indent + 2)
    first = True
    for members in summary.json_members("," + pad):
        write((("{" if first else ",") + pad + members).encode())
        first = False
    write(b"{}" if first else f"\n{' ' * indent}}}".encode())
