"""Read one rocprofv3 / rocprof CSV into per-name totals, binding columns by header name.

The kernel-trace layout changed several times between ROCm 6.1 and 7.x (and rocpd-converted
files change the header case), so nothing here relies on column positions. Big traces are
scanned lazily with polars, reading only the columns a total needs. Every file is first opened
through the core's bounded reader (FIFOs, devices, links out of the artifact folder and files
over the read limit are refused before polars sees them). These functions may raise on
unreadable input; :mod:`aorta_rocprof.parse` turns that into warnings.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from aorta_core.api import open_limited

#: Durations at or above 2**63 ns are unsigned wrap-arounds of a negative span (end < start).
WRAPPED_NS = float(2**63)


@dataclass
class Totals:
    """Summed GPU time (ns) and calls per name, plus what had to be dropped on the way."""

    ns: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    counts_trusted: bool = True
    dropped: int = 0

    def add(self, name: str, ns: float, calls: int) -> None:
        self.ns[name] = self.ns.get(name, 0.0) + ns
        self.calls[name] = self.calls.get(name, 0) + calls

    def merge(self, other: Totals) -> None:
        for name, ns in other.ns.items():
            self.add(name, ns, other.calls.get(name, 0))
        self.counts_trusted &= other.counts_trusted
        self.dropped += other.dropped


def open_csv(path: Path, root: Path) -> tuple[dict[str, str], Path | bytes]:
    """The header (lower-cased column name -> the name as written) and what polars reads: the
    path (a lazy scan), or the file's bytes when the path is not UTF-8 (polars refuses it)."""
    with open_limited(path, root) as fh:
        first = fh.readline(1 << 20)
        source = path if _utf8(path) else first + fh.read()
    names = next(csv.reader(io.StringIO(first.decode("utf-8-sig", "replace"))), [])  # BOM
    return {n.strip().lower(): n for n in names if n.strip()}, source


def _utf8(path: Path) -> bool:
    try:
        str(path).encode()
    except UnicodeEncodeError:  # a name byte such as 0xff, surrogate-escaped by Python
        return False
    return True


def _pick(columns: dict[str, str], *candidates: str) -> str | None:
    return next((columns[c.lower()] for c in candidates if c.lower() in columns), None)


def _strip_legacy(name: str) -> str:
    """Legacy rocprof names end in ``.kd`` or `` [clone .kd]``; rocprofv3 names do not."""
    for suffix in (" [clone .kd]", ".kd"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_stats(path: Path, root: Path) -> Totals | None:
    """``*_kernel_stats.csv`` (rocprofv3) or ``results.stats.csv`` (rocprof v1).

    ``None`` when the file lacks the ``Name``/``Calls``/``TotalDurationNs`` columns. Rows with
    an empty name or a duration that is non-finite, negative or wrapped are dropped and
    counted; a call count that is not a non-negative integer makes the counts untrusted.
    """
    columns, source = open_csv(path, root)
    name_col = _pick(columns, "Name")
    calls_col = _pick(columns, "Calls")
    total_col = _pick(columns, "TotalDurationNs")
    if name_col is None or calls_col is None or total_col is None:
        return None
    frame = pl.read_csv(
        source,
        columns=[name_col, calls_col, total_col],
        infer_schema=False,
        truncate_ragged_lines=True,
    )
    totals = Totals()
    for name, calls_text, total_text in frame.iter_rows():
        total = _number(total_text)
        if not name or total is None or total < 0 or total >= WRAPPED_NS:
            totals.dropped += 1
            continue
        calls = _number(calls_text)
        if calls is None or calls < 0 or calls != int(calls):
            totals.counts_trusted = False
            calls = 0
        totals.add(_strip_legacy(name), total, int(calls))
    return totals


def _number(text: str | None) -> float | None:
    """A finite float from CSV text (plain or scientific notation), else ``None``."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _spans(
    source: Path | bytes,
    start: str,
    end: str,
    keep: list[pl.Expr],
    tolerant: bool = True,
    categorical: tuple[str, ...] = (),
) -> pl.LazyFrame:
    """Lazy scan of ``keep`` plus ``dur = end - start`` in ns (float, so sums cannot overflow).

    ``tolerant`` turns unparsable timestamps and ragged lines into nulls; it costs speed, so
    the big kernel trace is first scanned strictly and rescanned tolerantly only on error.
    ``categorical`` columns (kernel names repeat) are read as categoricals to save memory.
    """
    return pl.scan_csv(
        source,
        infer_schema=False,
        schema_overrides={start: pl.Int64, end: pl.Int64}
        | {c: pl.Categorical for c in categorical},
        ignore_errors=tolerant,
        truncate_ragged_lines=tolerant,
    ).select(*keep, (pl.col(end) - pl.col(start)).cast(pl.Float64).alias("dur"))


def read_dispatches(path: Path, root: Path) -> Totals | None:
    """Sum dispatch spans per kernel from ``*_kernel_trace.csv`` or legacy ``results.csv``.

    ``None`` when the kernel-name and start/end columns are missing. Rows of another ``Kind``
    than ``KERNEL_DISPATCH`` are skipped; rows without a name or with a negative or unreadable
    span are dropped and counted. Each kept row is one dispatch. One streaming pass over only
    the needed columns.
    """
    columns, source = open_csv(path, root)
    name = _pick(columns, "Kernel_Name", "KernelName")
    start = _pick(columns, "Start_Timestamp", "BeginNs")
    end = _pick(columns, "End_Timestamp", "EndNs")
    if name is None or start is None or end is None:
        return None
    kind = _pick(columns, "Kind")
    keep = [pl.col(name).alias("name")] + ([pl.col(kind).alias("kind")] if kind else [])
    valid = (pl.col("name").is_not_null() & (pl.col("name") != "") & (pl.col("dur") >= 0)
             ).fill_null(False)
    categorical = (name, kind) if kind else (name,)
    try:
        lazy = _spans(source, start, end, keep, tolerant=False, categorical=categorical)
        grouped = _per_kernel(lazy, kind, valid)
    except pl.exceptions.PolarsError:
        lazy = _spans(source, start, end, keep, tolerant=True, categorical=categorical)
        grouped = _per_kernel(lazy, kind, valid)
    totals = Totals()
    for kernel, ns, n, bad in grouped.iter_rows():
        totals.dropped += int(bad)
        if kernel and n:
            totals.add(_strip_legacy(kernel), float(ns), int(n))
    return totals


def _per_kernel(lazy: pl.LazyFrame, kind: str | None, valid: pl.Expr) -> pl.DataFrame:
    if kind:
        lazy = lazy.filter(pl.col("kind").is_null() | (pl.col("kind") == "KERNEL_DISPATCH"))
    return lazy.group_by("name").agg(
        pl.col("dur").filter(valid).sum(), valid.sum().alias("n"), (~valid).sum().alias("bad")
    ).collect(engine="streaming")


@dataclass
class Spans:
    """The spans of a memory-copy or API trace: summed time and count of the usable rows, the
    rows dropped (no readable start and end, or end before start), and the bytes copied when
    the file has a size column."""

    ns: float = 0.0
    count: int = 0
    dropped: int = 0
    bytes: int | None = None


def read_spans(path: Path, root: Path) -> Spans | None:
    """``*_memory_copy_trace.csv`` or an API trace such as ``*_rccl_api_trace.csv``; ``None``
    without start/end columns. 7.x writes no byte column; a size column is read if present
    (summed as 128-bit ints: a 64-bit sum would wrap)."""
    columns, source = open_csv(path, root)
    start = _pick(columns, "Start_Timestamp")
    end = _pick(columns, "End_Timestamp")
    if start is None or end is None:
        return None
    size = _pick(columns, "Bytes", "Size")
    keep = [pl.col(size).cast(pl.Int64, strict=False).alias("size")] if size else []
    usable = (pl.col("dur") >= 0).fill_null(False)
    frame = _spans(source, start, end, keep).select(
        pl.col("dur").filter(usable).sum().alias("ns"),
        usable.sum().alias("count"),
        pl.len().alias("rows"),
        *([pl.col("size").filter(usable).cast(pl.Int128).sum().alias("bytes"),
           pl.col("size").filter(usable).null_count().alias("nb")]
          if size else []),
    ).collect()
    row = frame.row(0, named=True)
    spans = Spans(ns=float(row["ns"] or 0.0), count=int(row["count"]),
                  dropped=int(row["rows"]) - int(row["count"]))
    if size and row["nb"] == 0:
        spans.bytes = int(row["bytes"] or 0)
    return spans
