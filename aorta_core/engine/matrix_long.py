"""The trials' metrics in long form (one row per trial and metric present): the rows of
``matrix.parquet`` and what the statistics are taken from.

Two ways to build it, one result. When most trials carry most names (the usual sweep), one typed
column per metric is built from the trials' dicts and unpivoted (:func:`column_metrics`). When
names are many and sparse (e.g. 2,000 names per trial, distinct per trial), a column per name
would cost trials x names, and the trials' dicts alone several times the records' bytes: the
metrics are then turned into columns a chunk of trials at a time while the records are read
(:class:`SparseMetrics`), so time and memory follow the values present.

Either way a metric keeps one type across the sweep: numbers (ints and floats alike) are
``value``; bools (``true``/``false``), strings and lists (JSON) are ``text``; a metric whose
values mix numbers, text, bools or lists is JSON ``text`` throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import msgspec
import numpy as np

_encode = msgspec.json.Encoder().encode

#: Type codes of metric values (:data:`aorta_core.engine.records.MetricValue`), numbers first.
_KIND = {float: 0, int: 1, bool: 2, str: 3, list: 4}
_NUMBERS = b"\x00\x01"
_ROW = "\0row"
#: Values turned into columns at a time by :class:`SparseMetrics`.
CHUNK_VALUES = 50_000


@dataclass
class LongMetrics:
    """Every trial's metrics in long form: ``frame`` holds one row per trial and metric present
    (``row``: the trial's index; ``metric``; ``value`` for numbers, ``text`` for the rest): metric
    by metric, numbers first, when built by :func:`column_metrics`; trial by trial, each trial's
    in its record's order, when built by :class:`SparseMetrics`. ``bools`` and ``lists`` name the
    text metrics that hold bools and JSON lists (``metrics_text`` gives them back as such)."""

    frame: Any = None
    bools: set[str] = field(default_factory=set)
    lists: set[str] = field(default_factory=set)
    #: Dense metrics: the numeric ones, one Float64 column each over all trials (the statistics
    #: are fastest taken column by column); ``None`` for sparse ones.
    columns: list[Any] | None = None


def _metric_series(key: str, values: list):
    """One typed column: numbers as Float64, bools, text; lists of text as JSON text (decoded
    again for ``matrix.json``); a metric whose type differs between trials as JSON text too.
    Returns the series and whether it holds JSON lists."""
    import polars as pl

    kinds = set(map(type, values)) - {type(None)}
    if kinds <= {int, float}:
        return pl.Series(key, values, pl.Float64, strict=False), False
    if len(kinds) == 1 and kinds != {list}:
        return pl.Series(key, values, pl.String if kinds == {str} else pl.Boolean), False
    return pl.Series(key, [None if v is None else _encode(v).decode() for v in values],
                     pl.String), kinds == {list}


def column_metrics(rows: list[dict[str, Any]], keys: list[str]) -> LongMetrics:
    """Dense metrics (most trials carry most names): one typed column per metric of ``keys``
    (:func:`_metric_series`), unpivoted, metric by metric."""
    import polars as pl

    # beside one column per metric: named as no metric can be (names with a NUL are left out)
    row = pl.Series(_ROW, range(len(rows)), pl.UInt32)
    numeric, text, long = [], [], LongMetrics()
    for key in keys:
        column, is_json = _metric_series(key, [r.get(key) for r in rows])
        if column.dtype.is_numeric():
            numeric.append(column)
            continue
        text.append(column.cast(pl.String))
        if column.dtype == pl.Boolean:
            long.bools.add(key)
        if is_json:
            long.lists.add(key)
    frames = [empty_metrics()]
    if numeric:
        frames.append(pl.DataFrame([row, *numeric])
                      .unpivot(index=_ROW, variable_name="metric", value_name="value")
                      .drop_nulls("value").with_columns(text=pl.lit(None, pl.String)))
    if text:
        frames.append(pl.DataFrame([row, *text])
                      .unpivot(index=_ROW, variable_name="metric", value_name="text")
                      .drop_nulls("text").with_columns(value=pl.lit(None, pl.Float64)))
    long.frame = pl.concat([f.rename({_ROW: "row"}, strict=False).select("row", "metric", "value",
                                                                         "text") for f in frames])
    long.columns = numeric
    return long


def empty_metrics():
    import polars as pl

    return pl.DataFrame(schema={"row": pl.UInt32, "metric": pl.String, "value": pl.Float64,
                                "text": pl.String})


def _text_of(value: Any) -> str:
    """A non-numeric value as the long form's ``text`` (a bool as polars casts it)."""
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    return _encode(value).decode()


class SparseMetrics:
    """Sparse metrics (many names, each in few trials) turned into columns as trials are added,
    so that a trial's dict lives only until its chunk is converted. Each value keeps its type
    code (``kind``) until :meth:`finish` types each metric over the whole sweep."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []
        self.trials = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        """The metrics of the next ``len(rows)`` trials (the caller may drop ``rows`` then)."""
        import polars as pl

        values = list(chain.from_iterable(map(dict.values, rows)))
        kinds = bytes(map(_KIND.__getitem__, map(type, values)))
        if kinds.strip(_NUMBERS):  # some bools, text or lists: split values by kind
            numbers = [v if k <= 1 else None for v, k in zip(values, kinds, strict=True)]
            texts = [None if k <= 1 else _text_of(v) for v, k in zip(values, kinds, strict=True)]
        else:
            numbers, texts = values, None
        counts = pl.Series(list(map(len, rows)), dtype=pl.UInt32)
        self.chunks.append(pl.DataFrame({
            "row": pl.int_range(self.trials, self.trials + len(rows), dtype=pl.UInt32,
                                eager=True).repeat_by(counts).explode().drop_nulls(),
            "metric": pl.Series(list(chain.from_iterable(rows)), dtype=pl.String),
            "kind": pl.Series(np.frombuffer(kinds, np.uint8), dtype=pl.UInt8),
            "value": pl.Series(numbers, dtype=pl.Float64, strict=False),
            "text": pl.Series(texts or pl.repeat(None, len(values), eager=True), dtype=pl.String),
        }))
        self.trials += len(rows)

    def _frame(self):
        """Every value added so far: ``row``, ``metric``, ``kind``, ``value``, ``text``."""
        import polars as pl

        if not self.chunks:
            return empty_metrics().with_columns(kind=pl.lit(None, pl.UInt8))
        self.chunks = [pl.concat(self.chunks, rechunk=False)]  # a copy would cost the values again
        return self.chunks[0]

    def take_out(self, which) -> dict[str, tuple[int, int]]:
        """Leave out the metrics whose names ``which(pl.col("metric"))`` selects; (first trial,
        trials) that carried each."""
        import polars as pl

        frame = self._frame()
        hit = which(pl.col("metric"))
        found = (frame.filter(hit).group_by("metric", maintain_order=True)
                 .agg(first=pl.col("row").min(), n=pl.len()))
        if found.height:
            self.chunks = [frame.filter(~hit)]
        return {name: (first, n) for name, first, n in found.iter_rows()}

    def finish(self) -> LongMetrics:
        """The long form, each metric typed over the whole sweep: a metric whose values are of
        one kind (or numbers alone) keeps them; one that mixes numbers, bools, text or lists is
        the JSON text of each value, as :func:`_metric_series` makes it."""
        import polars as pl

        frame = self._frame()
        self.chunks = []
        kind, metric = pl.col("kind"), pl.col("metric")
        # Only metrics with a bool, text or list can be other than numbers (usually few values).
        per = frame.filter(kind >= 2).group_by("metric").agg(lo=kind.min(), hi=kind.max())
        with_numbers = frame.filter((kind <= 1) & metric.is_in(per["metric"].implode()))["metric"]
        single = per.filter((pl.col("lo") == pl.col("hi")) & ~metric.is_in(with_numbers.implode()))
        long = LongMetrics(bools=set(single.filter(pl.col("lo") == 2)["metric"]),
                           lists=set(single.filter(pl.col("lo") == 4)["metric"]))
        mixed = per.filter(~metric.is_in(single["metric"].implode()))["metric"]
        if mixed.len():
            frame = _as_json(frame, mixed)
        long.frame = frame.select("row", "metric", "value", "text")
        return long


def _as_json(frame, names):
    """``frame`` with the values of metrics ``names`` as JSON ``text`` (the rare metric whose
    type changes between trials: typed value by value in Python)."""
    import polars as pl

    at = frame.select(pl.arg_where(pl.col("metric").is_in(names.implode()))).to_series()
    part = frame[at]
    texts = [
        _encode(float(value) if kind == 0 else int(value)).decode() if kind <= 1
        else text if kind in (2, 4) else _encode(text).decode()
        for kind, value, text in part.select("kind", "value", "text").iter_rows()]
    value = frame["value"].scatter(at, pl.repeat(None, len(at), dtype=pl.Float64, eager=True))
    text = frame["text"].scatter(at, pl.Series(texts, dtype=pl.String))
    return frame.with_columns(value, text)
