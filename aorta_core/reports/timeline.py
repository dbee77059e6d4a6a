"""``aorta timeline``: one Trace Event Format file per trial, every rank and source on one clock.

Per rank, as ``rank <R> · ...`` processes sorted rank by rank:

- the built-in benchmark's ``benchmark/rank_<RR>_metrics.jsonl``: an iteration slice from its
  ``time_*_unix_ns`` (``time.time_ns()``), phase and collective slices, step time and overlap
  ratio as counters; its own profiler's Kineto traces (``benchmark/torch_profiler/``);
- the chrome traces each collector that ran names through ``timeline_sources``
  (:mod:`aorta_core.reports.timeline_inputs`), placed by the clock it declares: ``unix``
  (``ts`` µs + ``baseTimeNanoseconds`` is Unix time, as Kineto writes; HTA reads it so) at its
  place, with the collector's stated bound; ``relative`` (times count from the trace's start,
  with no absolute anchor, as Proton writes) centred in the span it must lie in (the
  benchmark's iterations, or the trial's run), half the slack being its bound.

Output ``ts`` are µs after the origin (``otherData.origin_unix_ns``): the trial's start from its
record, else the first benchmark iteration, else the first event of a Unix-clock trace of the
lowest rank that has one. ``--window`` counts ms from it. Each rank is merged in a worker process
of its own (:mod:`~aorta_core.reports.timeline_rank`) and spliced into the file in rank order, so
this process never holds a decoded trace. docs/reports.md "Merged timeline" says how far off each
alignment can be.
"""

from __future__ import annotations

import reprlib
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from aorta_core.api.oneline import exception_line
from aorta_core.api.parallel import parallel_map
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, load_record
from aorta_core.reports.relative_traces import record_start
from aorta_core.reports.timeline_clocks import place_ranks
from aorta_core.reports.timeline_inputs import RankInputs, discover, read_telemetry
from aorta_core.reports.timeline_rank import RankJob, first_event, merge_need, merge_rank
from aorta_core.reports.timeline_selection import EVERYTHING, Selection
from aorta_core.reports.trace_events import TraceWriter

if TYPE_CHECKING:
    from aorta_core.engine.cells import Cell

TIMELINE_NAME = "timeline.json"

Warn = Callable[[str], None]


def _origin(trial: Path, record: Mapping[str, Any] | None, ranks: dict[int, RankInputs],
            warn: Warn) -> tuple[int | None, str]:
    """The timeline's origin and what it is; a record's start that is no time (``1e300``) is
    passed over with one line."""
    start = record_start(record)
    if start is not None and start[1] == 0:
        return start[0], "record started_at_unix"
    origin: tuple[int | None, str] = (None, "")
    if start is not None:
        origin = start[0], "record started_at"
    elif firsts := [its[0].time_start_unix_ns for r in ranks.values() if r.jsonl
                    if (its := read_telemetry(r.jsonl, lambda _: None))]:
        origin = min(firsts), "first benchmark iteration"
    given = (record or {}).get("started_at_unix")
    if given is not None:
        warn(f"{trial / RECORD_NAME}: started_at_unix {reprlib.repr(given)} is no Unix time in "
             f"seconds (0 to 2^63 ns); the timeline's origin is the {origin[1] or 'first event'}"
             " instead")
    return origin



def _first_event_origin(trial: Path, ranks: dict[int, RankInputs]) -> tuple[int | None, str]:
    """The first event of a Unix-clock trace of the lowest rank that has one, each rank looked
    at in a worker of its own."""
    jobs = [(trial, inputs) for inputs in ranks.values()]
    for rank, done in zip(ranks, parallel_map(first_event, jobs), strict=True):
        if done.value is not None:
            first, label = done.value
            return first, f"first {label} event of rank {rank}"
    return None, ""


@dataclass(frozen=True)
class Timeline:
    """What was written: the file, its ranks and the events per source kind."""

    path: Path
    ranks: list[int]
    events: dict[str, int]


def build_timeline(trial: Path, output: Path | None = None, selection: Selection = EVERYTHING,
                   record: Mapping[str, Any] | None = None, warn: Warn = warning_line,
                   hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                   align: str = "collectives") -> Timeline | None:
    """Merge one trial's traces into ``output`` (default ``<trial>/timeline.json``; ``.gz``
    compresses). ``record`` defaults to the trial's ``record.json``; its collectors are asked
    for their traces (``timeline_sources``, each within ``hook_timeout_s``). ``align``: which
    clock each rank is placed on (:mod:`.timeline_clocks`). ``None`` when the trial holds no
    source; unreadable inputs are skipped with a warning naming the file."""
    trial = Path(trial).absolute()
    if record is None:
        try:
            record = msgspec.to_builtins(load_record(trial / RECORD_NAME))
        except (FileNotFoundError, BadRecord):
            record = None
    inputs = discover(trial, record, warn, hook_timeout_s)
    if not inputs:
        warn(f"{trial}: nothing to merge (no benchmark rank_*_metrics.jsonl or torch_profiler "
             "trace, no trace named by a collector's timeline_sources)")
        return None
    ranks = sorted(r for r in inputs if selection.ranks is None or r in selection.ranks)
    if not ranks:
        warn(f"{trial}: no rank in --ranks {selection.to_json()['ranks']} "
             f"(ranks there: {', '.join(map(str, sorted(inputs)))}); nothing written")
        return None
    origin, origin_from = _origin(trial, record, inputs, warn)
    if origin is None:
        origin, origin_from = _first_event_origin(trial, {r: inputs[r] for r in ranks})
    placement = place_ranks(align, trial, {r: inputs[r] for r in ranks}, warn)
    path = Path(output) if output is not None else trial / TIMELINE_NAME
    written, sources, clock_checks, selected = [], [], [], False
    with tempfile.TemporaryDirectory(prefix=".aorta-timeline-", dir=path.parent) as scratch, \
            TraceWriter(path) as writer:
        jobs, flow_block = [], 1
        for slot, rank in enumerate(ranks):
            jobs.append(RankJob(trial, rank, inputs[rank], selection, record, origin,
                                placement.clocks.get(rank), placement.applies_checks(),
                                1 + slot, len(ranks), flow_block,
                                Path(scratch) / f"rank{rank}.events"))
            flow_block += len(inputs[rank].traces)  # one block of flow ids per file
        for job, done in zip(jobs, parallel_map(merge_rank, jobs, need=merge_need), strict=True):
            if done.error is not None:
                warn(f"rank {job.rank}: left out of the timeline ({done.error})")
                continue
            for line in done.value.notes:
                warn(line)
            writer.splice(job.fragment, done.value.events)
            job.fragment.unlink()
            written.append(job.rank)
            selected = selected or done.value.selected
            sources += done.value.sources
            clock_checks += done.value.clock_checks
        if written and not selected:  # a timeline of lane names only: the old one stays
            writer.abort()
            warn(f"{trial}: nothing in the selection ({selection.text()}) on any rank; "
                 f"{path.name} not written")
            return None
        events: dict[str, int] = defaultdict(int)
        for source in sources:
            events[source["kind"]] += source["events"]
        writer.close({
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": origin or 0,
            "otherData": {"aorta_timeline": 1, "trial": str(trial.resolve()),
                          "origin_unix_ns": origin or 0, "origin": origin_from or "none",
                          "selection": selection.to_json(), "ranks": written,
                          "sources": sources, "clock_checks": clock_checks,
                          "align": align, "rank_alignment": placement.entries},
        })
    return Timeline(path, written, dict(events))


def trial_dirs(path: Path) -> list[Path]:
    """A sweep output's trial folders (``cells/*/trial_*``), a cell folder's (``trial_*`` with
    a record), or ``[path]`` for one trial or a folder of traces."""
    if (path / "cells").is_dir():
        return sorted(p for p in path.glob("cells/*/trial_*") if p.is_dir())
    return sorted(p for p in path.glob("trial_*") if (p / RECORD_NAME).is_file()) or [path]


def timeline_step(cell: Cell) -> Callable[[Path, Mapping[str, Any]], None] | None:
    """The trial step that writes ``timeline.json`` when ``cell`` asks for it (``timeline=true``),
    for :func:`aorta_core.engine.trial.run_trial`'s ``after_run``; ``None`` otherwise."""
    if not cell.timeline:
        return None
    return lambda trial_dir, record: write_trial_timeline(trial_dir, record, cell.hook_timeout_s)


def write_trial_timeline(trial_dir: Path, record: Mapping[str, Any] | None = None,
                         hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S) -> Path | None:
    """``<trial_dir>/timeline.json`` with every rank and source (the sweep's ``timeline=true``).

    Call it before retention prunes the traces; pass the record being built when
    ``record.json`` is not written yet (its ``started_at_unix``, ``wall_time_s`` and
    ``collectors`` are used). Never raises: a problem is a warning and ``None``.
    """
    try:
        done = build_timeline(Path(trial_dir), record=record, hook_timeout_s=hook_timeout_s)
    except Exception as exc:  # the trial's results matter more than its timeline
        warning_line(f"no timeline for {trial_dir} ({exception_line(exc)})")
        return None
    return done.path if done else None
