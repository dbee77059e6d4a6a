"""Interval arithmetic shared by the benchmark's stream overlap and torchprof's trace overlap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


def union_length(starts: Sequence[float] | pl.Series, ends: Sequence[float] | pl.Series) -> float:
    """Total length of the union of the intervals ``[start, end)``.

    Sorted by start, each interval adds what it reaches past every earlier end, so overlapping
    and touching intervals count once (HolisticTraceAnalysis's ``merge_kernel_intervals``).
    Vectorised: a 200k-kernel trace takes milliseconds.
    """
    import polars as pl

    frame = pl.DataFrame({"start": starts, "end": ends}).cast(pl.Float64).sort("start")
    reach = pl.max_horizontal("start", pl.col("end").cum_max().shift(1))
    return float(frame.select((pl.col("end") - reach).clip(lower_bound=0).sum()).item())
