"""Each rank's Kineto traces read into one :class:`RankTrace`, one rank per worker process.

What crosses from a worker to the parent is small: per step its breakdown
(:mod:`~aorta_core.reports.step_breakdown`), and the rank's steps, iteration markers and
collectives; never a decoded trace or the rank's intervals (docs/diagnose.md, "Inputs"). Every
analysis across ranks (the diagnosis, the ranks' clocks) starts from these.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np

from aorta_core.api.files import FileRefused
from aorta_core.api.intervals import merge
from aorta_core.api.parallel import decoded_bytes, parallel_map
from aorta_core.api.ranks import world_size_in_head
from aorta_core.reports.step_breakdown import INTERVALS, StepParts, break_down
from aorta_core.reports.trace_columns import (
    DECODER,
    SPANS,
    OneFile,
    Reader,
    file_steps,
    read_one,
)
from aorta_core.reports.trace_events import off_the_clock, read_trace

Warn = Callable[[str], None]

#: The start of a collective's (name, ts, dur): :attr:`RankTrace.collectives` is sorted by it.
_START = itemgetter(1)


@dataclass
class RankTrace:
    """One rank's steps (µs, the trace's clock) and their breakdowns, and its collectives."""

    device: bool = False
    steps: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: The benchmark's ``aorta.iteration#N`` ranges (start, end), where the trace has them.
    iterations: dict[int, tuple[float, float]] = field(default_factory=dict)
    breakdown: dict[int, StepParts] = field(default_factory=dict)
    #: Collective executions, by start: (name, ts, dur).
    collectives: list[tuple[str, float, float]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    #: How many of its files could not be read (each said why in a warning).
    unread: int = 0
    #: The job's size as its traces' ``distributedInfo`` states it, where they do.
    world_size: int | None = None
    #: Unix time less the trace's clock, ns: ``baseTimeNanoseconds`` of the first file it takes
    #: steps from (0 where the trace writes Unix time itself). The diagnosis compares durations
    #: and needs it not; the ranks' clocks (:mod:`~aorta_core.reports.rank_alignment`) do.
    base_ns: int = 0
    #: The host that wrote that file, as Kineto names it (``host_name``), where it does.
    host: str | None = None

    def collectives_in(self, a: float, b: float) -> list[tuple[str, float, float]]:
        """Its collectives that start in ``[a, b)``, by start: one slice, found in log time."""
        ordered = self.collectives
        return ordered[bisect.bisect_left(ordered, a, key=_START):
                       bisect.bisect_left(ordered, b, key=_START)]

    def rescale(self, rate: float, about: float | None = None, shift: float = 0.0) -> None:
        """Every time ``t`` moved to ``about + (t - about) / rate + shift`` (``about``: the first
        step's start by default): a trace whose clock ran ``rate`` times the wall clock
        measured back, and moved by ``shift`` µs."""
        origin = min(a for a, _ in self.steps.values()) if about is None else about

        def at(t: float) -> float:
            return origin + (t - origin) / rate + shift
        self.steps = {n: (at(a), at(b)) for n, (a, b) in self.steps.items()}
        self.iterations = {n: (at(a), at(b)) for n, (a, b) in self.iterations.items()}
        self.collectives = [(name, at(ts), dur / rate) for name, ts, dur in self.collectives]
        for step in self.breakdown.values():
            step.parts = {k: v / rate for k, v in step.parts.items()}
            step.exposed = at(step.exposed)
            step.longest_host = (step.longest_host[0] / rate, step.longest_host[1])
            step.gaps = [{k: v / rate for k, v in gap.items()} for gap in step.gaps]


#: A worker's peak per byte of a rank's decoded traces, one file at a time, where a file cannot
#: be read in pieces (decoded whole: its events, the file's pages and the columns, 3.3x a 160 MB
#: trace of bench_ranks' capture); read in pieces the same file peaks at 0.8x.
_MEMORY_PER_BYTE = 4


def _rank_need(job: tuple[list[Path], Path]) -> int:
    try:
        return _MEMORY_PER_BYTE * max((decoded_bytes(p) for p in job[0]), default=0)
    except OSError:
        return 0  # the worker's read says why


def _read_rank_job(job: tuple[list[Path], Path]) -> tuple[RankTrace, list[str]]:
    """:func:`read_rank` in a worker process: its notes come back with its trace."""
    notes: list[str] = []
    return read_rank(job[0], job[1], notes.append), notes


def read_ranks(paths: Mapping[int, list[Path]], root: Path, warn: Warn) -> dict[int, RankTrace]:
    """Every rank's :func:`read_rank`, one rank per worker process (as ``aorta parse`` reads
    files): the parent holds only the ranks' intervals, never a decoded trace. A rank whose
    worker failed is left out, after a warning."""
    ranks = sorted(paths)
    jobs = [(paths[rank], root) for rank in ranks]
    out = {}
    for rank, done in zip(ranks, parallel_map(_read_rank_job, jobs, need=_rank_need),
                          strict=True):
        if done.error is not None:
            warn(f"rank {rank}: its traces could not be read ({done.error}); left out")
            continue
        out[rank], notes = done.value
        for line in notes:
            warn(line)
    return out


def relative(path: Path, root: Path) -> str:
    """``path`` as shown: inside ``root`` relative to it, else as it is."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _meet(x: tuple[float, float], y: tuple[float, float]) -> bool:
    return x[0] < y[1] and y[0] < x[1]


def read_rank(paths: Iterable[Path], root: Path, warn: Warn) -> RankTrace:
    """One rank's intervals from its Kineto traces (no steps: none holds a ProfilerStep). A
    file whose steps another file of the rank already gave is skipped: two profilers of the
    same steps would count each collective twice; the same step numbers at other times are
    another run's, and said."""
    out = RankTrace()
    files: list[OneFile] = []
    given: dict[int, str] = {}  # each step's file
    for path in paths:
        try:
            reader = Reader()
            doc = read_trace(path, root, DECODER, (SPANS, reader.piece))
        except (ValueError, FileRefused) as exc:
            warn(f"{path}: skipped, {exc}")
            out.unread += 1
            continue
        out.world_size = out.world_size or world_size_in_head(path, root)
        if not out.sources:
            base = doc.baseTimeNanoseconds
            out.base_ns = base if type(base) is int else 0
            out.host = doc.host_name if isinstance(doc.host_name, str) else None
        columns = reader.columns(doc.traceEvents)
        del doc
        if columns.far:
            warn(off_the_clock(path, columns.far))
        steps, shown = file_steps(columns), relative(path, root)
        known = sorted(set(steps) & set(out.steps))
        if known and not any(_meet(steps[n], out.steps[n]) for n in known):
            warn(f"{path}: skipped, another run's: its ProfilerStep#{known[0]}"
                 f"{'' if len(known) == 1 else f'-#{known[-1]}'} lie at other times than in "
                 f"{given[known[0]]}; diagnose each run's traces in a folder of their own")
            continue
        if len(known) == len(steps):  # no steps, or only steps already read
            continue
        found = read_one(columns, steps)
        files.append(found)
        given.update(dict.fromkeys(found.steps, shown))
        out.steps.update(found.steps)
        out.iterations.update(found.iterations)
        out.device = out.device or found.device
        out.collectives += found.collectives
        out.sources.append(shown)
    if not out.steps:
        return out
    intervals = {part: merge(*np.hstack([getattr(f, part) for f in files]))
                 for part in INTERVALS}
    out.collectives.sort(key=_START)
    starts = np.concatenate([f.starts for f in files])
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    names = [name for f in files for name in f.names]
    names = [names[i] for i in order.tolist()]
    for step, (a, b) in out.steps.items():
        ranges = [(ts, ts + dur) for _, ts, dur in out.collectives_in(a, b)]
        out.breakdown[step] = break_down(intervals, a, b, starts, names, ranges)
    return out
