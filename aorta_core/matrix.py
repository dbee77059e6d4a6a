"""Merge every trial record of a sweep into ``matrix.json``, ``matrix.parquet`` and ``perf.md``.

Run at the end of a multirun (Hydra callback) and on demand (``aorta matrix <output>``), e.g.
after a cluster array. Statistics cover the passing trials of each cell only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.records import RECORD_NAME, SCHEMA_VERSION, write_json_atomic

CELL_FILE = "cell.json"
VERDICTS = ("pass", "fail", "error")
STATS = ("mean", "median", "std", "min", "max", "n")


@dataclass(frozen=True)
class MatrixResult:
    paths: list[Path]
    cells: list[dict[str, Any]]
    unreadable: list[Path]


def _subdirs(path: Path) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(path) as entries:
            yield from sorted((e for e in entries if e.is_dir()), key=lambda e: e.name)
    except FileNotFoundError:
        return


class _Environment(msgspec.Struct):
    host: str | None = None
    gpus: list[Any] = []
    packages: dict[str, str | None] = {}
    collectors: dict[str, str] = {}
    python: str | None = None


class _Record(msgspec.Struct):
    """The part of a trial record the matrix needs; msgspec skips the rest while decoding."""

    cell: str
    verdict: str
    schema_version: int
    trial: int | None = None
    axes: dict[str, str] = {}
    argv: list[str] | None = None
    wall_time_s: float | None = None
    metrics: dict[str, float | int | str | list[str] | bool | None] = {}
    environment: _Environment = msgspec.field(default_factory=_Environment)


_decode_record = msgspec.json.Decoder(_Record).decode


def _load_cell(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            value = msgspec.json.decode(fh.read())
    except (OSError, msgspec.DecodeError):
        return None
    return value if isinstance(value, dict) else None


def scan(output: Path) -> tuple[list[dict], list[_Record], list[Path]]:
    """(cell descriptions, trial records, unreadable record paths) under ``output/cells``."""
    cells, records, unreadable = [], [], []
    for cell_entry in _subdirs(output / "cells"):
        cell = _load_cell(os.path.join(cell_entry.path, CELL_FILE)) or {"cell": cell_entry.name}
        cell["dir"] = f"cells/{cell_entry.name}"
        cells.append(cell)
        for trial_entry in _subdirs(Path(cell_entry.path)):
            if not trial_entry.name.startswith("trial_"):
                continue
            path = os.path.join(trial_entry.path, RECORD_NAME)
            try:
                with open(path, "rb") as fh:
                    records.append(_decode_record(fh.read()))
            except FileNotFoundError:
                continue
            except (OSError, msgspec.DecodeError):
                unreadable.append(Path(path))
    return cells, records, unreadable


def _long_rows(records: list[_Record], axis_names: list[str]) -> dict[str, list]:
    cell, trial, verdict, metric, value, text = [], [], [], [], [], []
    axis_cols: dict[str, list] = {a: [] for a in axis_names}
    for rec in records:
        items = list(rec.metrics.items())
        if rec.wall_time_s is not None:
            items.append(("wall_time_s", rec.wall_time_s))
        n = len(items)
        cell += [rec.cell] * n
        trial += [rec.trial] * n
        verdict += [rec.verdict] * n
        for a in axis_names:
            axis_cols[a] += [rec.axes.get(a)] * n
        for key, v in items:
            metric.append(key)
            if (type(v) is float or type(v) is int):
                value.append(v)
                text.append(None)
            else:
                value.append(None)
                text.append(v if type(v) is str else msgspec.json.encode(v).decode())
    return {**{f"axis:{a}": v for a, v in axis_cols.items()}, "cell": cell, "trial": trial,
            "verdict": verdict, "metric": metric, "value": value, "text": text}


def _summaries(long) -> dict[str, dict[str, dict[str, float | int | None]]]:
    import polars as pl

    stats = (
        long.filter((pl.col("verdict") == "pass") & pl.col("value").is_not_null())
        .group_by("cell", "metric")
        .agg(
            pl.col("value").mean().alias("mean"),
            pl.col("value").median().alias("median"),
            pl.col("value").std().alias("std"),
            pl.col("value").min().alias("min"),
            pl.col("value").max().alias("max"),
            pl.len().alias("n"),
        )
        .sort("cell", "metric")
    )
    out: dict[str, dict[str, dict]] = {}
    for row in stats.iter_rows(named=True):
        out.setdefault(row["cell"], {})[row["metric"]] = {k: row[k] for k in STATS}
    return out


def _texts(records: list[_Record]) -> dict[str, dict[str, Any]]:
    """Non-numeric metrics (e.g. top kernel names) of each cell's first passing trial."""
    out: dict[str, dict[str, Any]] = {}
    for rec in sorted(records, key=lambda r: (r.cell, r.trial or 0)):
        if rec.verdict != "pass" or rec.cell in out:
            continue
        out[rec.cell] = {
            k: v for k, v in rec.metrics.items()
            if not isinstance(v, (int, float)) and not k.endswith("_artifact_dir")
        }
    return out


def _environments(records: list[_Record]) -> list[dict[str, Any]]:
    seen: dict[bytes, dict] = {}
    for rec in records:
        key = msgspec.json.encode(rec.environment)
        if key not in seen:
            seen[key] = msgspec.structs.asdict(rec.environment)
    return list(seen.values())


def build(output: Path) -> MatrixResult:
    """Scan ``output`` and write the three matrix files atomically."""
    import polars as pl

    output = Path(output)
    cells, records, unreadable = scan(output)
    axis_names = sorted({a for r in records for a in r.axes}
                        | {a for c in cells for a in (c.get("axes") or {})})
    long = pl.DataFrame(
        _long_rows(records, axis_names),
        schema={**{f"axis:{a}": pl.String for a in axis_names}, "cell": pl.String,
                "trial": pl.Int64, "verdict": pl.String, "metric": pl.String,
                "value": pl.Float64, "text": pl.String},
    )
    summaries = _summaries(long)
    texts = _texts(records)
    counts: dict[str, dict[str, int]] = {}
    first: dict[str, _Record] = {}
    for rec in records:
        c = counts.setdefault(rec.cell, dict.fromkeys(("total", *VERDICTS), 0))
        c["total"] += 1
        c[rec.verdict] = c.get(rec.verdict, 0) + 1
        first.setdefault(rec.cell, rec)
    matrix_cells = []
    for cell in cells:
        name = cell["cell"]
        summary = summaries.get(name, {})
        matrix_cells.append({
            "cell": name,
            "dir": cell["dir"],
            "axes": cell.get("axes") or (first[name].axes if name in first else {}),
            "command": cell.get("command") or (first[name].argv if name in first else None),
            "collectors": cell.get("collectors") or [],
            "error": cell.get("error"),
            "trials": counts.get(name, dict.fromkeys(("total", *VERDICTS), 0)),
            "wall_time_s": summary.pop("wall_time_s", None),
            "metrics_summary": summary,
            "metrics_text": texts.get(name, {}),
        })
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
        "unreadable_records": [str(p.relative_to(output)) for p in unreadable],
        "environments": _environments(records),
        "cells": matrix_cells,
    }
    json_path, parquet_path, md_path = (output / n for n in
                                        ("matrix.json", "matrix.parquet", "perf.md"))
    write_json_atomic(json_path, matrix)
    tmp = parquet_path.with_name(f".{parquet_path.name}.tmp")
    long.write_parquet(tmp)
    os.replace(tmp, parquet_path)
    from aorta_core.perfmd import render

    tmp_md = md_path.with_name(f".{md_path.name}.tmp")
    tmp_md.write_text(render(matrix), encoding="utf-8")
    os.replace(tmp_md, md_path)
    return MatrixResult([json_path, parquet_path, md_path], matrix_cells, unreadable)
