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
values present, never trials x names. :mod:`aorta_core.engine.matrix_summary` keeps the
statistics of such a sweep out of Python dicts.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from aorta_core.api.files import write_atomic
from aorta_core.engine.matrix_long import CHUNK_VALUES, LongMetrics, SparseMetrics, column_metrics
from aorta_core.engine.matrix_summary import column_summaries, sparse, summaries, write_matrix_json
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import (
    CELL_FILE,
    RECORD_NAME,
    SCHEMA_VERSION,
    VERDICTS,
    BadRecord,
    TrialRecord,
    load_cell_file,
    load_record,
)

if TYPE_CHECKING:
    from aorta_core.engine.collector_sections import CollectorSection

WALL = "wall_time_s"
_ID = ("cell", "trial", "verdict")
#: Names the matrix uses itself (columns of its frames, the parquet's long form): a metric so
#: named would clash with them, so it is left out of the matrix with a warning. ``axis:<name>``
#: columns and the NUL that joins a metric to its statistic are reserved the same way.
RESERVED = frozenset((*_ID, WALL, "metric", "value", "text"))
_AXIS_PREFIX = "axis:"
_ENVIRONMENT_KEYS = ("host", "gpus", "packages", "collectors", "python")
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


def incomplete(cell: dict[str, Any]) -> bool:
    """A cell of the matrix that was refused, has a failed or errored trial, or recorded fewer
    trials than it planned (a job the scheduler ended); one left out on purpose (``skipped``)
    is not."""
    trials, planned = cell["trials"], cell.get("planned_trials")
    return not cell.get("skipped") and bool(
        cell.get("error") or trials.get("fail") or trials.get("error")
        or (isinstance(planned, int) and trials.get("total", 0) < planned))


def is_agreement(output: Path) -> bool:
    """Whether ``output`` is a ``sweep=agree``'s: a cell file marks its cell ``agree`` (cell
    files only, no record is read; an unreadable one is passed over, the matrix warns of it)."""
    for entry in _subdirs(output / "cells"):
        try:
            if load_cell_file(Path(entry.path) / CELL_FILE).get("agree"):
                return True
        except (OSError, BadRecord):
            continue
    return False


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
    #: The trials' metrics while they look dense (most trials carry most names), one dict each;
    #: once a chunk of them is sparse, all are turned into columns as they come (``sparse``).
    metrics: list[dict[str, Any]] = field(default_factory=list)
    sparse: SparseMetrics | None = None
    #: Each run of records with one environment contributes its first (compared whole, in C).
    environments: list[dict[str, Any]] = field(default_factory=list)
    #: The first record of each cell: its axes and command when the cell file is missing.
    first: dict[str, TrialRecord] = field(default_factory=dict)
    _checked: int = 0  # metrics[:_checked] were found dense
    _values: int = 0  # values in metrics[_checked:]

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
            trials._values += len(rec.metrics)
            if trials._values >= CHUNK_VALUES:
                trials._settle()
            if rec.environment != previous:
                previous = rec.environment
                trials.environments.append(previous)
            trials.first.setdefault(rec.cell, rec)
        return trials

    def _settle(self) -> None:
        """Check the metrics added since the last check: while they are dense they stay dicts;
        from the first sparse chunk on, every trial's are turned into columns."""
        added = self.metrics[self._checked:]
        if self.sparse is None and not sparse(len(added) * len(set(chain.from_iterable(added))),
                                              self._values):
            self._checked = len(self.metrics)
        else:
            self.sparse = self.sparse or SparseMetrics()
            self.sparse.add(self.metrics)
            self.metrics.clear()
            self._checked = 0
        self._values = 0

    def long_form(self, output: Path) -> LongMetrics:
        """The metrics of every trial in long form, names the matrix reserves left out with a
        warning (:func:`_warn_reserved`)."""
        rows, self.metrics = self.metrics, []
        if self.sparse is None:
            keys = list(dict.fromkeys(chain.from_iterable(rows)))
            reserved = _reserved(keys)
            if reserved:
                _warn_reserved(output, _take_out(rows, reserved))
                keys = [k for k in keys if k not in set(reserved)]
            if not sparse(len(rows) * len(keys), sum(map(len, rows))):
                return column_metrics(rows, keys)
            self.sparse = SparseMetrics()
        self.sparse.add(rows)
        rows.clear()
        found = self.sparse.take_out(_is_reserved)
        if found:
            _warn_reserved(output, found)
        return self.sparse.finish()


def _is_reserved(names):
    """Which metric names of the expression ``names`` are :data:`RESERVED`, ``axis:`` columns or
    hold a NUL."""
    return (names.is_in(list(RESERVED)) | names.str.starts_with(_AXIS_PREFIX)
            | names.str.contains("\0", literal=True))


def _reserved(keys: list[str]) -> list[str]:
    """The metric names of ``keys`` that :func:`_is_reserved`."""
    import polars as pl

    names = pl.Series(keys, dtype=pl.String)
    return names.filter(_is_reserved(names)).to_list()


def _take_out(rows: list[dict[str, Any]], names: list[str]) -> dict[str, tuple[int, int]]:
    """Take ``names`` out of the trials' metrics; (first trial, trials) that carried each."""
    found: dict[str, tuple[int, int]] = {}
    for i, row in enumerate(rows):
        for name in names:
            if name in row:
                del row[name]
                first, count = found.get(name, (i, 0))
                found[name] = (first, count + 1)
    return found


def _warn_reserved(output: Path, found: dict[str, tuple[int, int]]) -> None:
    """Warn once per reserved name left out (each record keeps the matrix's own column),
    naming the first record that carries it. Only a sweep with such a name pays for finding
    its records again."""
    wanted = {first for first, _ in found.values()}
    paths: dict[int, str] = {}
    for i, (path, _) in enumerate(_located(output, [], [])):
        if i in wanted:
            paths[i] = os.path.relpath(path, output)
        if len(paths) == len(wanted):
            break
    for name, (first, count) in found.items():
        others = f" (and {count - 1} other record(s))" if count > 1 else ""
        warning_line(f"metric {name!r} of {paths.get(first, 'a record')}{others} collides with "
                     "the matrix's own column; it is left out: rename it in the "
                     "collector/payload")


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


def _write_long(tmp: Path, meta, metrics: LongMetrics, axis_cols: list[str]) -> None:
    """``matrix.parquet``: one row per trial and metric, each trial's wall time first, then the
    metrics (:class:`~aorta_core.engine.matrix_long.LongMetrics`' order), each row with its trial's
    axes, cell, index and verdict. Streamed: those columns are never held for every row."""
    import polars as pl

    wall = (meta.lazy().select(row=pl.int_range(pl.len(), dtype=pl.UInt32), metric=pl.lit(WALL),
                               value=pl.col(WALL), text=pl.lit(None, pl.String))
            .drop_nulls("value"))
    row = pl.col("row")
    ids = [pl.lit(meta[c]).gather(row).alias(c) for c in (*axis_cols, *_ID)]
    (pl.concat([wall, metrics.frame.lazy()])
     .select(*ids, "metric", "value", "text")
     .sink_parquet(tmp))


def _texts(meta, metrics: LongMetrics) -> dict[str, dict[str, Any]]:
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
            "planned_trials": cell.get("trials"),
            WALL: walls.get(name),
            "metrics_summary": summaries.get(name, {}),
            "metrics_text": texts.get(name, {}),
        })
    return entries


def _write_lines(tmp: Path, lines: Iterator[str]) -> None:
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.writelines(lines)


def build(output: Path, sections: Sequence[CollectorSection] = ()) -> MatrixResult:
    """Scan ``output`` and write the three matrix files atomically; ``sections`` (the app's,
    e.g. a ``sweep=agree``'s verdicts) go into perf.md before the collectors' own."""
    with _no_gc():  # until _build's records and frames are freed
        return _build(Path(output), sections)


def _build(output: Path, extra: Sequence[CollectorSection]) -> MatrixResult:
    from aorta_core.engine.collector_sections import collector_sections
    from aorta_core.engine.perfmd import render_lines

    cells: list[dict] = []
    bad: list[BadRecord] = []
    trials = _Trials.gather(records_of(output, cells, bad))
    metrics = trials.long_form(output)
    axis_names = sorted({a for axes in trials.axes for a in axes}
                        | {a for c in cells for a in (c.get("axes") or {})})
    meta = _trials_frame(trials, axis_names)
    stats = (summaries(metrics.frame, meta, WALL) if metrics.columns is None
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
    axis_cols = [f"axis:{a}" for a in axis_names]
    write_atomic(paths[1], lambda tmp: _write_long(tmp, meta, metrics, axis_cols))
    sections = [*extra, *collector_sections(matrix, output)]
    write_atomic(paths[2], lambda tmp: _write_lines(tmp, render_lines(matrix, sections)))
    return MatrixResult(paths, matrix_cells, bad)
