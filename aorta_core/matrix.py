"""Merge every trial record of a sweep into ``matrix.json``, ``matrix.parquet`` and ``perf.md``.

Run at the end of every sweep and on demand (``aorta matrix <output>``), e.g. after a cluster
array. Statistics cover the passing trials of each cell only.

Speed (bench/bench_core.py, linear from 1,000 to 100,000 records): records are read with raw
reads and decoded (and validated) by msgspec into :class:`TrialRecord` with the cyclic garbage
collector paused, and each is dropped as soon as the few fields the matrix uses are taken. Their
metrics become the long form of ``matrix.parquet`` (one row per trial and metric present), from
which the statistics are taken: built column by column (one typed list per metric) when most
trials carry most names, value by value when names are many and sparse (e.g. 2,000 names per
trial, distinct per trial: bench/bench_matrix_sparse.py), so that time and memory follow the
values present, never trials x names. :mod:`aorta_core.matrix_summary` keeps the statistics of
such a sweep out of Python dicts.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain, compress
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.files import write_atomic
from aorta_core.matrix_summary import column_summaries, sparse, summaries, write_matrix_json
from aorta_core.progress import warning_line
from aorta_core.records import (
    CELL_FILE,
    RECORD_NAME,
    SCHEMA_VERSION,
    VERDICTS,
    BadRecord,
    TrialRecord,
    load_cell_file,
    load_record,
)

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
    """The cell file, checked (:func:`load_cell_file`); ``None`` (the cell is named after its
    folder) when there is none, or with one warning when it cannot be used."""
    try:
        return load_cell_file(path)
    except OSError:
        return None
    except BadRecord as exc:
        warning_line(f"bad cell file {exc}; the cell is named after its folder: run the sweep "
                     "again to rewrite it")
        return None


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


def _reserved(keys: list[str]) -> list[str]:
    """The metric names of ``keys`` that are :data:`RESERVED`, ``axis:`` columns or hold a NUL."""
    import polars as pl

    names = pl.Series(keys, dtype=pl.String)
    return names.filter(names.is_in(list(RESERVED)) | names.str.starts_with(_AXIS_PREFIX)
                        | names.str.contains("\0", literal=True)).to_list()


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


@dataclass
class _LongMetrics:
    """Every trial's metrics in long form: ``frame`` holds one row per trial and metric present
    (``row``: the trial's index; ``metric``; ``value`` for numbers, ``text`` for the rest), the
    numeric metrics first, each metric's rows together in the order the names first appear,
    trials in order. ``bools`` and ``lists`` name the text metrics that hold bools and JSON lists
    (``metrics_text`` gives them back as such)."""

    frame: Any = None
    bools: set[str] = field(default_factory=set)
    lists: set[str] = field(default_factory=set)
    #: Dense metrics: the numeric ones, one Float64 column each over all trials (the statistics
    #: are fastest taken column by column).
    columns: list[Any] | None = None


def _long_metrics(rows: list[dict[str, Any]], keys: list[str]) -> _LongMetrics:
    """Sparse metrics are built value by value (one typed column per name would cost trials x
    names), dense ones column by column."""
    present = sum(map(len, rows))
    if sparse(len(rows) * len(keys), present):
        return _sparse_metrics(rows, keys, present)
    return _column_metrics(rows, keys)


def _column_metrics(rows: list[dict[str, Any]], keys: list[str]) -> _LongMetrics:
    """Dense metrics (most trials carry most names): one typed column per metric of ``keys``
    (:func:`_metric_series`), unpivoted."""
    import polars as pl

    row = pl.Series("row", range(len(rows)), pl.UInt32)
    numeric, text, long = [], [], _LongMetrics()
    for key in keys:
        column, is_json = _metric_series(key, [r.get(key) for r in rows])
        if column.dtype.is_numeric():
            numeric.append(column.cast(pl.Float64))
            continue
        text.append(column.cast(pl.String))
        if column.dtype == pl.Boolean:
            long.bools.add(key)
        if is_json:
            long.lists.add(key)
    frames = [_empty_metrics()]
    if numeric:
        frames.append(pl.DataFrame([row, *numeric])
                      .unpivot(index="row", variable_name="metric", value_name="value")
                      .drop_nulls("value").with_columns(text=pl.lit(None, pl.String)))
    if text:
        frames.append(pl.DataFrame([row, *text])
                      .unpivot(index="row", variable_name="metric", value_name="text")
                      .drop_nulls("text").with_columns(value=pl.lit(None, pl.Float64)))
    long.frame = pl.concat([f.select("row", "metric", "value", "text") for f in frames])
    long.columns = numeric
    return long


def _empty_metrics():
    import polars as pl

    return pl.DataFrame(schema={"row": pl.UInt32, "metric": pl.String, "value": pl.Float64,
                                "text": pl.String})


#: Type codes of metric values (:data:`aorta_core.records.MetricValue`), numbers first.
_KIND = {float: 0, int: 1, bool: 2, str: 3, list: 4}


def _text_of(value: Any) -> str:
    """A non-numeric value as the long form's ``text`` (a bool as polars casts it)."""
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    return _encode(value).decode()


def _sparse_metrics(rows: list[dict[str, Any]], keys: list[str], present: int) -> _LongMetrics:
    """Sparse metrics (many names, each in few trials), value by value: memory and time linear
    in the values present. Each metric keeps the type :func:`_metric_series` gives it: one of a
    single kind (or of ints and floats) is typed here in bulk; the rare one that mixes other
    kinds, or holds an int beyond 64 bits, goes through :func:`_metric_series` itself."""
    import polars as pl

    names: list[str] = []
    values: list[Any] = []
    counts: list[int] = []
    for i, metrics in enumerate(rows):
        names.extend(metrics)
        values.extend(metrics.values())
        counts.append(len(metrics))
        rows[i] = {}  # its names and values live on in names and values
    kind = pl.Series("kind", list(map(_KIND.__getitem__, map(type, values))), pl.UInt8)
    frame = pl.DataFrame({
        "row": _repeat_index(pl.Series(counts, dtype=pl.UInt32)),
        "metric": pl.Series(names, dtype=pl.String), "kind": kind})
    del names
    value = pl.repeat(None, present, dtype=pl.Float64, eager=True).alias("value")
    text = pl.repeat(None, present, dtype=pl.String, eager=True).alias("text")

    def of_kind(mask) -> list[Any]:
        return list(compress(values, mask.to_list()))

    value.scatter((kind == 0).arg_true(), pl.Series(of_kind(kind == 0), dtype=pl.Float64))
    has_ints = pl.lit(False)
    try:
        value.scatter((kind == 1).arg_true(),
                      pl.Series(of_kind(kind == 1), dtype=pl.Int64, strict=True)
                      .cast(pl.Float64))
    except (TypeError, OverflowError, pl.exceptions.PolarsError):  # an int beyond 64 bits
        has_ints = (pl.col("lo") <= 1) & (pl.col("hi") >= 1)
    others = kind >= 2
    text.scatter(others.arg_true(), list(map(_text_of, of_kind(others))))
    per = frame.group_by("metric").agg(lo=pl.col("kind").min(), hi=pl.col("kind").max())
    single = per.filter(pl.col("lo") == pl.col("hi"))
    long = _LongMetrics(bools=set(single.filter(pl.col("lo") == 2)["metric"]),
                        lists=set(single.filter(pl.col("lo") == 4)["metric"]))
    mixed = per.filter(((pl.col("lo") != pl.col("hi")) & (pl.col("hi") >= 2)) | has_ints)
    if mixed.height:
        _retype(frame.select("metric").with_row_index("at")
                .filter(pl.col("metric").is_in(mixed["metric"].implode())),
                values, value, text, long)
    values.clear()
    order = pl.Enum(keys)
    long.frame = (frame.with_columns(value, text)
                  .filter(pl.col("value").is_not_null() | pl.col("text").is_not_null())
                  .sort(pl.col("text").is_not_null(), pl.col("metric").cast(order),
                        maintain_order=True)
                  .select("row", "metric", "value", "text"))
    return long


def _repeat_index(counts):
    """[0, 0, 0, 1, 2, 2] for counts [3, 1, 2]: the row of each value."""
    import polars as pl

    return pl.int_range(counts.len(), dtype=pl.UInt32, eager=True).repeat_by(counts).explode() \
        .drop_nulls()


def _retype(where, values: list[Any], value, text, long: _LongMetrics) -> None:
    """Type the metrics at rows ``where`` (``at``, ``metric``) as :func:`_metric_series` does."""
    import polars as pl

    for (name,), group in where.group_by("metric", maintain_order=True):
        at = group["at"]
        column, is_json = _metric_series(name, [values[i] for i in at])
        none = pl.repeat(None, len(at), eager=True)
        if column.dtype.is_numeric():
            value.scatter(at, column.cast(pl.Float64))
            text.scatter(at, none.cast(pl.String))
        else:
            text.scatter(at, column.cast(pl.String))
            value.scatter(at, none.cast(pl.Float64))
            if is_json:
                long.lists.add(name)


def _trials_frame(trials: _Trials, axis_names: list[str]):
    """One row per trial: its cell, index, verdict, wall time and axes."""
    import polars as pl

    return pl.DataFrame(
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


def _long(meta, metrics: _LongMetrics, axis_cols: list[str]):
    """``matrix.parquet``: one row per trial and metric, wall time and the numeric metrics
    (``value``) before the rest (``text``: strings, bools, lists as JSON)."""
    import polars as pl

    wall = (meta.select(row=pl.int_range(pl.len(), dtype=pl.UInt32), metric=pl.lit(WALL),
                        value=pl.col(WALL), text=pl.lit(None, pl.String))
            .drop_nulls("value"))
    rows = pl.concat([wall, metrics.frame])
    index = [*axis_cols, *_ID]
    ids = meta.select(pl.col(*index).gather(rows["row"])) if index else meta
    schema = {**{c: pl.String for c in axis_cols}, "cell": pl.String, "trial": pl.Int64,
              "verdict": pl.String, "metric": pl.String, "value": pl.Float64, "text": pl.String}
    return pl.concat([pl.DataFrame(schema=schema),
                      ids.hstack(rows.select("metric", "value", "text"))])


def _texts(meta, metrics: _LongMetrics) -> dict[str, dict[str, Any]]:
    """Non-numeric metrics (e.g. top kernel names) of each cell's first passing trial."""
    import polars as pl

    firsts = (meta.with_row_index("row").filter(pl.col("verdict") == "pass")
              .sort("cell", "trial").group_by("cell", maintain_order=True).first())
    cells = dict(zip(firsts["row"], firsts["cell"], strict=True))
    rows = metrics.frame.filter(pl.col("text").is_not_null()
                                & pl.col("row").is_in(firsts["row"].implode())
                                & ~pl.col("metric").str.ends_with("_artifact_dir"))
    out: dict[str, dict[str, Any]] = {}
    for row, metric, text in rows.select("row", "metric", "text").iter_rows():
        out.setdefault(cells[row], {})[metric] = (
            text == "true" if metric in metrics.bools
            else msgspec.json.decode(text) if metric in metrics.lists else text)
    return out


def _environments(environments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The distinct machines/software stacks of the sweep (what makes runs comparable)."""
    distinct = {}
    for environment in environments:
        key = {k: environment.get(k) for k in _ENVIRONMENT_KEYS}
        distinct.setdefault(_encode_sorted(key), key)
    return [distinct[k] for k in sorted(distinct)]


def _cell_entries(cells: list[dict], first: dict[str, TrialRecord], meta, walls, summaries,
                  texts) -> list[dict]:
    counts: dict[str, dict[str, int]] = {}
    for cell, verdict, n in meta.group_by("cell", "verdict").len().iter_rows():
        c = counts.setdefault(cell, dict.fromkeys(("total", *VERDICTS), 0))
        c["total"] += n
        c[verdict] += n
    entries = []
    for cell in cells:
        name = cell["cell"]
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
            WALL: walls.get(name),
            "metrics_summary": summaries.get(name, {}),
            "metrics_text": texts.get(name, {}),
        })
    return entries


def _write_lines(tmp: Path, lines: Iterator[str]) -> None:
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.writelines(lines)


def build(output: Path) -> MatrixResult:
    """Scan ``output`` and write the three matrix files atomically."""
    with _no_gc():  # until _build's records and frames are freed
        return _build(Path(output))


def _build(output: Path) -> MatrixResult:
    from aorta_core.perfmd import render_lines

    cells: list[dict] = []
    bad: list[BadRecord] = []
    trials = _Trials.gather(records_of(output, cells, bad))
    keys = list(dict.fromkeys(chain.from_iterable(trials.metrics)))
    reserved = _reserved(keys)
    if reserved:
        _drop_reserved(output, trials.metrics, reserved)
        dropped = set(reserved)
        keys = [k for k in keys if k not in dropped]
    metrics = _long_metrics(trials.metrics, keys)
    axis_names = sorted({a for axes in trials.axes for a in axes}
                        | {a for c in cells for a in (c.get("axes") or {})})
    meta = _trials_frame(trials, axis_names)
    long = _long(meta, metrics, [f"axis:{a}" for a in axis_names])
    stats = (summaries(long, WALL, len(cells)) if metrics.columns is None
             else column_summaries(meta.select("cell", "verdict", WALL).hstack(metrics.columns),
                                   WALL))
    matrix_cells = _cell_entries(cells, trials.first, meta, *stats, _texts(meta, metrics))
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
    write_atomic(paths[0], lambda tmp: write_matrix_json(tmp, matrix))
    write_atomic(paths[1], long.write_parquet)
    write_atomic(paths[2], lambda tmp: _write_lines(tmp, render_lines(matrix)))
    return MatrixResult(paths, matrix_cells, bad)
