"""Merge every trial record of a sweep into ``matrix.json``, ``matrix.parquet`` and ``perf.md``.

Run at the end of every sweep and on demand (``aorta matrix <output>``), e.g. after a cluster
array. Statistics cover the passing trials of each cell only.

Speed (bench/bench_core.py, linear from 1,000 to 100,000 records): records are read with raw
reads and decoded (and validated) by msgspec into :class:`TrialRecord` with the cyclic garbage
collector paused, and each is dropped as soon as the few fields the matrix uses are taken; their
metrics become one wide polars frame, one row per trial and one typed column per metric, built
column by column (one list per metric, no Series per row).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.files import write_atomic
from aorta_core.progress import warning_line
from aorta_core.records import (
    CELL_FILE,
    RECORD_NAME,
    SCHEMA_VERSION,
    VERDICTS,
    BadRecord,
    TrialRecord,
    load_record,
    read_json,
    write_json_atomic,
)

STATS = ("mean", "median", "std", "min", "max", "n")
WALL = "wall_time_s"
_ID = ("cell", "trial", "verdict")
#: Names the matrix uses itself (columns of its frames, the parquet's long form): a metric so
#: named would clash with them, so it is left out of the matrix with a warning. ``axis:<name>``
#: columns and the NUL that joins a metric to its statistic are reserved the same way.
RESERVED = frozenset((*_ID, WALL, "metric", "value", "text"))
_AXIS_PREFIX = "axis:"
_ENVIRONMENT_KEYS = ("host", "gpus", "packages", "collectors", "python")
_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


@dataclass(frozen=True)
class MatrixResult:
    paths: list[Path]
    cells: list[dict[str, Any]]
    #: Records that could not be used: named by path, left out, and re-run by the next sweep.
    bad: list[BadRecord]


def _subdirs(path: Path) -> Iterator[os.DirEntry]:
    """Sub-folders in name order; links are skipped (aorta never follows one out of output)."""
    try:
        with os.scandir(path) as entries:
            yield from sorted((e for e in entries if e.is_dir(follow_symlinks=False)),
                              key=lambda e: e.name)
    except FileNotFoundError:
        return


def _load_cell(path: Path) -> dict[str, Any] | None:
    try:
        value = read_json(path)
    except (OSError, msgspec.DecodeError):
        return None
    return value if isinstance(value, dict) else None


def _trial_index(name: str) -> int | None:
    digits = name.removeprefix("trial_")
    return int(digits) if name.startswith("trial_") and digits.isdigit() else None


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: decoding 100k records allocates millions of
    containers, and the collections they trigger (scanning every one already made, none of
    them part of a cycle) cost more than the decoding itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def records_of(output: Path, cells: list[dict], bad: list[BadRecord]) -> Iterator[TrialRecord]:
    """Each valid trial record under ``output/cells``, one at a time, so that a caller keeps only
    what it needs of each; cell descriptions and bad records are appended to ``cells`` and
    ``bad`` as they are met. A record counts only where it stands: it must name its cell and
    its trial folder's index."""
    for _, record in _located(output, cells, bad):
        yield record


def _located(output: Path, cells: list[dict], bad: list[BadRecord]
             ) -> Iterator[tuple[str, TrialRecord]]:
    """(path, record) for :func:`records_of`, in its order."""
    for cell_entry in _subdirs(output / "cells"):
        cell = _load_cell(Path(cell_entry.path) / CELL_FILE) or {"cell": cell_entry.name}
        cell["dir"] = f"cells/{cell_entry.name}"
        cells.append(cell)
        name = str(cell["cell"])
        for trial_entry in _subdirs(Path(cell_entry.path)):
            index = _trial_index(trial_entry.name)
            if index is None:
                continue
            path = f"{trial_entry.path}{os.sep}{RECORD_NAME}"  # a Path costs as much as a read
            try:
                yield path, load_record(path, name, index)
            except FileNotFoundError:
                continue
            except BadRecord as exc:
                bad.append(exc)


def scan(output: Path) -> tuple[list[dict], list[TrialRecord], list[BadRecord]]:
    """(cell descriptions, valid trial records, bad records) under ``output/cells``."""
    cells: list[dict] = []
    bad: list[BadRecord] = []
    with _no_gc():
        records = list(records_of(output, cells, bad))
    return cells, records, bad


@dataclass
class _Trials:
    """What the matrix keeps of each record, field by field: a whole :class:`TrialRecord` (about
    a hundred objects) costs more to keep and free than to decode, so each is dropped once read."""

    cell: list[str] = field(default_factory=list)
    trial: list[int] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    wall_time_s: list[float | None] = field(default_factory=list)
    axes: list[dict[str, str]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    #: Each run of records with one environment contributes its first (compared whole, in C).
    environments: list[dict[str, Any]] = field(default_factory=list)
    #: The first record of each cell: its axes and command when the cell file is missing.
    first: dict[str, TrialRecord] = field(default_factory=dict)

    @classmethod
    def gather(cls, records: Iterator[TrialRecord]) -> _Trials:
        trials = cls()
        previous = None
        for rec in records:
            trials.cell.append(rec.cell)
            trials.trial.append(rec.trial)
            trials.verdict.append(rec.verdict)
            trials.wall_time_s.append(rec.wall_time_s)
            trials.axes.append(rec.axes)
            trials.metrics.append(rec.metrics)
            if rec.environment != previous:
                previous = rec.environment
                trials.environments.append(previous)
            trials.first.setdefault(rec.cell, rec)
        return trials


def _metric_series(key: str, values: list):
    """One typed column: numbers (ints alone stay ints), bools, text; lists of text as JSON text
    (decoded again for ``matrix.json``); a metric whose type differs between trials as JSON
    text too. Returns the series and whether it holds JSON lists."""
    import polars as pl

    first = next((v for v in values if v is not None), None)
    if not isinstance(first, list):  # inferring lists, polars builds a Series per value
        try:  # one type throughout, inferred in Rust: the common case
            return pl.Series(key, values, strict=True), False
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            pass
    kinds = set(map(type, values)) - {type(None)}
    if kinds <= {int, float} and kinds:  # ints and floats mixed, or an int beyond 64 bits
        return pl.Series(key, values, pl.Int64 if kinds == {int} else pl.Float64,
                         strict=False), False
    return pl.Series(key, [None if v is None else _encode(v).decode() for v in values],
                     pl.String), kinds == {list}


def _is_reserved(name: str) -> bool:
    return name in RESERVED or name.startswith(_AXIS_PREFIX) or "\0" in name


def _drop_reserved(output: Path, rows: list[dict[str, Any]], names: list[str]) -> None:
    """Take the reserved ``names`` out of the trials' metrics (each record keeps the matrix's
    own column) and warn once per name, naming the first record that carries it. Only a sweep
    with such a name pays for finding its records again."""
    first: dict[str, int] = {}
    count = dict.fromkeys(names, 0)
    for i, row in enumerate(rows):
        for name in names:
            if name in row:
                del row[name]
                first.setdefault(name, i)
                count[name] += 1
    paths: dict[int, str] = {}
    for i, (path, _) in enumerate(_located(output, [], [])):
        if i in first.values():
            paths[i] = os.path.relpath(path, output)
        if len(paths) == len(set(first.values())):
            break
    for name, i in first.items():
        others = f" (and {count[name] - 1} other record(s))" if count[name] > 1 else ""
        warning_line(f"metric {name!r} of {paths.get(i, 'a record')}{others} collides with the "
                     "matrix's own column; it is left out: rename it in the collector/payload")


def _metrics_frame(rows: list[dict[str, Any]], keys: list[str]):
    """One row per trial, one typed column per metric (:func:`_metric_series`) of ``keys``, and
    the names of the columns that hold JSON text of lists."""
    import polars as pl

    series, json_columns = [], set()
    for key in keys:
        column, is_json = _metric_series(key, [row.get(key) for row in rows])
        series.append(column)
        if is_json:
            json_columns.add(key)
    return pl.DataFrame(series), json_columns


def _wide(trials: _Trials, axis_names: list[str], metrics):
    import polars as pl

    meta = pl.DataFrame(
        {
            "cell": trials.cell,
            "trial": trials.trial,
            "verdict": trials.verdict,
            WALL: trials.wall_time_s,
            **{f"axis:{a}": [axes.get(a) for axes in trials.axes] for a in axis_names},
        },
        schema={"cell": pl.String, "trial": pl.Int64, "verdict": pl.String, WALL: pl.Float64,
                **{f"axis:{a}": pl.String for a in axis_names}},
    )
    return meta.hstack(metrics) if metrics.width else meta


def _summaries(wide, numeric: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    import polars as pl

    passing = wide.filter(pl.col("verdict") == "pass")
    aggs = []
    for c in numeric:
        col = pl.col(c).cast(pl.Float64)
        aggs += [col.mean().alias(f"{c}\0mean"), col.median().alias(f"{c}\0median"),
                 col.std().alias(f"{c}\0std"), col.min().alias(f"{c}\0min"),
                 col.max().alias(f"{c}\0max"), col.count().alias(f"{c}\0n")]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in passing.group_by("cell").agg(aggs).iter_rows(named=True):
        out[row["cell"]] = {
            c: {s: row[f"{c}\0{s}"] for s in STATS} for c in numeric if row[f"{c}\0n"]
        }
    return out


def _texts(wide, text: list[str], json_columns: set[str]) -> dict[str, dict[str, Any]]:
    """Non-numeric metrics (e.g. top kernel names) of each cell's first passing trial."""
    import polars as pl

    text = [c for c in text if not c.endswith("_artifact_dir")]
    firsts = (wide.filter(pl.col("verdict") == "pass").sort("cell", "trial")
              .group_by("cell", maintain_order=True).first().select("cell", *text))
    return {row.pop("cell"): {k: msgspec.json.decode(v) if k in json_columns else v
                              for k, v in row.items() if v is not None}
            for row in firsts.iter_rows(named=True)}


def _long(wide, numeric: list[str], text: list[str], axis_cols: list[str]):
    """One row per trial and metric: ``value`` for numbers, ``text`` for the rest (JSON lists)."""
    import polars as pl

    index = [*axis_cols, *_ID]
    schema = {**{c: pl.String for c in axis_cols}, "cell": pl.String, "trial": pl.Int64,
              "verdict": pl.String, "metric": pl.String, "value": pl.Float64, "text": pl.String}
    frames = [pl.DataFrame(schema=schema)]
    if numeric:
        frames.append(
            wide.select(*index, *(pl.col(c).cast(pl.Float64) for c in numeric))
            .unpivot(index=index, on=numeric, variable_name="metric", value_name="value")
            .drop_nulls("value")
            .with_columns(text=pl.lit(None, dtype=pl.String))
        )
    if text:
        frames.append(
            wide.select(*index, *(pl.col(c).cast(pl.String) for c in text))
            .unpivot(index=index, on=text, variable_name="metric", value_name="text")
            .drop_nulls("text")
            .with_columns(value=pl.lit(None, dtype=pl.Float64))
        )
    return pl.concat([f.select(list(schema)) for f in frames])


def _environments(environments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The distinct machines/software stacks of the sweep (what makes runs comparable)."""
    distinct = {}
    for environment in environments:
        key = {k: environment.get(k) for k in _ENVIRONMENT_KEYS}
        distinct.setdefault(_encode_sorted(key), key)
    return [distinct[k] for k in sorted(distinct)]


def _cell_entries(cells: list[dict], first: dict[str, TrialRecord], wide, summaries, texts
                  ) -> list[dict]:
    counts: dict[str, dict[str, int]] = {}
    for cell, verdict, n in wide.group_by("cell", "verdict").len().iter_rows():
        c = counts.setdefault(cell, dict.fromkeys(("total", *VERDICTS), 0))
        c["total"] += n
        c[verdict] += n
    entries = []
    for cell in cells:
        name = cell["cell"]
        summary = dict(summaries.get(name, {}))
        entries.append({
            "cell": name,
            "dir": cell["dir"],
            "axes": cell.get("axes") or (first[name].axes if name in first else {}),
            "command": cell.get("command") or (first[name].argv if name in first else None),
            "collectors": cell.get("collectors") or [],
            "error": cell.get("error"),
            "skipped": cell.get("skipped"),
            "auto": cell.get("auto"),
            "agree": cell.get("agree"),
            "trials": counts.get(name, dict.fromkeys(("total", *VERDICTS), 0)),
            WALL: summary.pop(WALL, None),
            "metrics_summary": summary,
            "metrics_text": texts.get(name, {}),
        })
    return entries


def build(output: Path) -> MatrixResult:
    """Scan ``output`` and write the three matrix files atomically."""
    with _no_gc():  # until _build's records and frames are freed
        return _build(Path(output))


def _build(output: Path) -> MatrixResult:
    from aorta_core.perfmd import render

    cells: list[dict] = []
    bad: list[BadRecord] = []
    trials = _Trials.gather(records_of(output, cells, bad))
    keys = list(dict.fromkeys(chain.from_iterable(trials.metrics)))
    reserved = [k for k in keys if _is_reserved(k)]
    if reserved:
        _drop_reserved(output, trials.metrics, reserved)
        keys = [k for k in keys if k not in reserved]
    metrics, json_columns = _metrics_frame(trials.metrics, keys)
    metric_schema = metrics.schema
    axis_names = sorted({a for axes in trials.axes for a in axes}
                        | {a for c in cells for a in (c.get("axes") or {})})
    wide = _wide(trials, axis_names, metrics)
    numeric = [WALL, *(c for c, t in metric_schema.items() if t.is_numeric())]
    text = [c for c, t in metric_schema.items() if not t.is_numeric()]
    matrix_cells = _cell_entries(cells, trials.first, wide, _summaries(wide, numeric),
                                 _texts(wide, text, json_columns))
    totals = dict.fromkeys(("total", *VERDICTS), 0)
    for c in matrix_cells:
        for k in totals:
            totals[k] += c["trials"].get(k, 0)
    matrix = {
        "schema_version": SCHEMA_VERSION,
        "output": str(output.resolve()),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "axes": axis_names,
        "trials": totals,
        "unreadable_records": [str(b.path.relative_to(output)) for b in bad],
        "environments": _environments(trials.environments),
        "cells": matrix_cells,
    }
    paths = [output / n for n in ("matrix.json", "matrix.parquet", "perf.md")]
    write_json_atomic(paths[0], matrix)
    long = _long(wide, numeric, text, [f"axis:{a}" for a in axis_names])
    write_atomic(paths[1], long.write_parquet)
    write_atomic(paths[2], render(matrix).encode())
    return MatrixResult(paths, matrix_cells, bad)
