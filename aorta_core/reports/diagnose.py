"""``aorta diagnose``: why is a step slow, on which rank, and who waits for it.

Reads the Kineto traces of every rank of a trial (the benchmark's profiling block, and each
collector's ``timeline_sources``: :func:`~aorta_core.reports.timeline_inputs.discover`) and
writes ``diagnosis.json``: per rank and ``ProfilerStep#N`` the step's time split into parts that
sum to it, the stragglers, and findings ranked by the ms at stake. docs/diagnose.md has the
definitions and how they differ from HolisticTraceAnalysis's.

Each rank's traces are read and its steps broken down in a worker
(:mod:`~aorta_core.reports.rank_traces`, :mod:`~aorta_core.reports.step_breakdown`); here the
ranks are compared. ``comm_wait`` is the part of ``comm_exposed`` a rank spends in collectives
waiting for a later rank: a collective ends together on every rank, so its duration beyond the
shortest rank's is time spent waiting for that rank to arrive (HTA's straggler analysis reads the
same fact as "late-starting communication kernels").
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
from msgspec import UNSET

from aorta_core.api.files import write_atomic
from aorta_core.api.intervals import inside, merge
from aorta_core.api.oneline import exception_line
from aorta_core.benchmark.schema import RankRecord
from aorta_core.engine.diagnosis_section import DIAGNOSIS_NAME
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, dump_json, load_record
from aorta_core.reports.clock_check import clock_rate
from aorta_core.reports.collectives import Collective, matched
from aorta_core.reports.rank_traces import RankTrace, Warn, read_ranks, relative
from aorta_core.reports.step_breakdown import PARTS
from aorta_core.reports.straggler_thresholds import (
    FINDING_SHARE,
    MIN_EXCESS_MS,
    MIN_EXCESS_PCT,
    MOST_STEPS,
)
from aorta_core.reports.timeline_clocks import Placement, fit_clocks
from aorta_core.reports.timeline_inputs import RankInputs, discover, read_telemetry

# The columnar reader, under the names tests/reports/test_diagnose.py reads it by here.
from aorta_core.reports.trace_columns import DECODER as _DECODER  # noqa: F401
from aorta_core.reports.trace_columns import SPANS as _SPANS  # noqa: F401
from aorta_core.reports.trace_columns import Reader as _Reader  # noqa: F401
from aorta_core.reports.trace_columns import Span as _Span  # noqa: F401
from aorta_core.reports.trace_columns import file_steps as _steps  # noqa: F401
from aorta_core.reports.trace_columns import read_one as _read_one  # noqa: F401
from aorta_core.reports.what_if import what_if

if TYPE_CHECKING:
    from aorta_core.engine.cells import Cell

SCHEMA_VERSION = 1
#: What the parts are called in findings.
WORDS = {
    "compute": "compute (kernels, or CPU ops on a CPU trace)",
    "comm_hidden": "communication hidden under compute",
    "comm_exposed": "exposed communication that is not waiting for other ranks",
    "host": "host time with the device idle (outside any op: Python, launches, sleeps)",
    "data": "data loading",
    "other": "other device work (memory copies and sets)",
}


def _pairs(spans: list[tuple[float, float]]) -> np.ndarray:
    if not spans:
        return np.empty((2, 0))
    arr = np.asarray(spans, dtype=float)
    return merge(arr[:, 0], arr[:, 1])


# --- waiting for other ranks -----------------------------------------------------------------

def _overlap(x: np.ndarray, y: np.ndarray) -> float:
    """The length of the intersection of two sets of merged intervals."""
    if not (x.shape[1] and y.shape[1]):
        return 0.0
    points = np.unique(np.concatenate((x.ravel(), y.ravel())))
    mids = (points[:-1] + points[1:]) / 2
    return float(np.diff(points)[inside(x, mids) & inside(y, mids)].sum())


def _waits(traces: Mapping[int, RankTrace], shared: list[Collective]
           ) -> tuple[dict[int, np.ndarray], dict[int, dict[str, float]]]:
    """Per rank, the intervals of a step spent waiting in its ``shared`` collectives
    (:func:`~aorta_core.reports.collectives.matched`) for a later rank, and the µs waited per
    collective name: each rank's copy of a collective lasts longer than the shortest by the
    time it waited."""
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    by_name: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for collective in shared:
        shortest = min(end - start for start, end in collective.spans.values())
        for rank, (start, end) in collective.spans.items():
            dur = end - start
            if dur > shortest:
                spans[rank].append((start, start + dur - shortest))
                by_name[rank][collective.name] += dur - shortest
    return ({r: _pairs(spans.get(r, [])) for r in traces},
            {r: dict(v) for r, v in by_name.items()})


def _arrival_lags(traces: Mapping[int, RankTrace], shared: list[Collective],
                  placement: Placement) -> dict[int, float]:
    """Per rank on the common clock, the most it arrived after every other rank at one of a
    step's ``shared`` collectives (µs, 0 if never last): what the waits mean, measured on one
    clock rather than read from durations. Only ranks that the placement aligned count."""
    lags: dict[int, float] = {}
    for collective in shared:
        starts = {rank: at for rank, (start, _) in collective.spans.items()
                  if (at := placement.on_one_clock(rank, traces[rank].base_ns / 1e3 + start))
                  is not None}
        if len(starts) < 2:
            continue
        ordered = sorted(starts, key=starts.__getitem__)
        last, before = ordered[-1], ordered[-2]
        lags[last] = max(lags.get(last, 0.0), starts[last] - starts[before])
        for rank in ordered[:-1]:
            lags.setdefault(rank, 0.0)
    return lags


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _round(value: float) -> float:
    return round(value, 3)


def analyse(traces: Mapping[int, RankTrace], min_excess_ms: float = MIN_EXCESS_MS,
            min_excess_pct: float = MIN_EXCESS_PCT, last_step: bool = False,
            left_out: list[int] | None = None, *, placement: Placement) -> dict[str, Any]:
    """The diagnosis of ranks' traces: per rank and step, stragglers, findings. The steps are
    those every rank profiled, less the last one unless ``last_step`` (as HTA drops it: the
    trace is exported as it ends, and a collective of it may run into the export).
    ``left_out``: the job's ranks that have no trace here. ``placement``: the ranks' clocks on
    one (:func:`~aorta_core.reports.timeline_clocks.fit_clocks`), for the stragglers' arrival
    lag."""
    steps = sorted(set.intersection(*(set(t.steps) for t in traces.values())))
    if len(steps) > 1 and not last_step:
        steps = steps[:-1]
    ranks: dict[int, dict[str, Any]] = {}
    means: dict[int, dict[str, float]] = {}
    waited_in: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hosts: dict[int, list[tuple[float, str | None]]] = defaultdict(list)
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    lags: dict[int, list[float]] = defaultdict(list)
    for step in steps:
        shared = matched(traces, [step])
        waits, names = _waits(traces, shared)
        for rank, lag in _arrival_lags(traces, shared, placement).items():
            lags[rank].append(lag / 1e3)
        for rank, trace in traces.items():
            a, b = trace.steps[step]
            done = trace.breakdown[step]
            row = {"step": step, "step_ms": (b - a) / 1e3,
                   **{f"{k}_ms": v for k, v in done.parts.items()},
                   "comm_wait_ms": _overlap(waits[rank], done.exposed) / 1e3}
            rows[rank].append(row)
            hosts[rank].append(done.longest_host)
            for name, us in names.get(rank, {}).items():
                waited_in[rank][name] += us / 1e3
    for rank, trace in sorted(traces.items()):
        keys = ["step_ms", *(f"{k}_ms" for k in PARTS), "comm_wait_ms"]
        means[rank] = {k: _mean([r[k] for r in rows[rank]]) for k in keys}
        ranks[rank] = {
            "sources": trace.sources, "device": "gpu" if trace.device else "cpu",
            "steps": [{k: (_round(v) if isinstance(v, float) else v) for k, v in r.items()}
                      for r in rows[rank]],
            "mean": {k: _round(v) for k, v in means[rank].items()},
        }
    stragglers = _stragglers(means, rows, hosts, waited_in, min_excess_ms, min_excess_pct)
    for entry in stragglers:
        _add_arrival_lag(entry, lags, placement)
    measured = [statistics.median(rows[r][i]["step_ms"] for r in rows) for i in range(len(steps))]
    return {"steps": steps, "ranks": {str(r): v for r, v in ranks.items()},
            "stragglers": stragglers, "findings": _findings(means, stragglers, left_out or []),
            "what_if": what_if(traces, steps, measured, [s["rank"] for s in stragglers])}


def _busy(step: Mapping[str, float]) -> float:
    """A rank's own time in a step: the step less its waiting for other ranks."""
    return step["step_ms"] - step["comm_wait_ms"]


def _own(step: Mapping[str, float], part: str) -> float:
    """A part of a rank's own time: exposed communication without its waiting."""
    value = step[f"{part}_ms"]
    return value - step["comm_wait_ms"] if part == "comm_exposed" else value


def _above(rows: Mapping[int, list[dict[str, Any]]], rank: int,
           value: Callable[[Mapping[str, float]], float]) -> list[float]:
    """Per step, how far ``value`` of ``rank``'s step is above the median of the other
    ranks' in the same step."""
    others = [r for r in rows if r != rank]
    return [value(mine) - statistics.median(value(rows[r][i]) for r in others)
            for i, mine in enumerate(rows[rank])]


def _stragglers(means: Mapping[int, Mapping[str, float]],
                rows: Mapping[int, list[dict[str, Any]]],
                hosts: Mapping[int, list[tuple[float, str | None]]],
                waited_in: Mapping[int, Mapping[str, float]],
                min_excess_ms: float, min_excess_pct: float) -> list[dict[str, Any]]:
    """Ranks whose own time per step (the step less its waiting) exceeds the other ranks'
    by the thresholds, as the median over steps and in most steps (a rank slower now and
    then is jitter, not a straggler); the part holding the excess; the ranks that wait."""
    nsteps = min((len(v) for v in rows.values()), default=0)
    if len(means) < 2 or not nsteps:
        return []
    step = statistics.median(m["step_ms"] for m in means.values())
    floor = max(min_excess_ms, min_excess_pct / 100 * step)
    out = []
    for rank in means:
        per_step = _above(rows, rank, _busy)
        excess, over = statistics.median(per_step), sum(v >= floor for v in per_step)
        if excess < floor or over < math.ceil(MOST_STEPS * nsteps):
            continue
        by_part = {p: statistics.median(_above(rows, rank, lambda row, p=p: _own(row, p)))
                   for p in PARTS}
        part = max(by_part, key=by_part.__getitem__)
        waiting = {r: m["comm_wait_ms"] for r, m in means.items()
                   if r != rank and m["comm_wait_ms"] >= 0.5 * excess}
        entry: dict[str, Any] = {
            "rank": rank, "excess_ms_per_step": _round(excess), "category": part,
            "slower_in_steps": f"{over}/{nsteps}",
            "by_category_ms": {p: _round(v) for p, v in by_part.items()},
            "waiting_ranks": sorted(waiting),
            "wait_ms_per_step": {str(r): _round(v) for r, v in sorted(waiting.items())},
            "waited_in": sorted({n for r in waiting for n, ms in waited_in.get(r, {}).items()
                                 if ms / nsteps >= 0.1 * excess}),
        }
        if part == "host":
            gaps = [name for ms, name in hosts[rank] if ms >= 0.5 * by_part["host"]]
            entry["host_gap_before"] = (statistics.mode(gaps) if gaps and None not in gaps
                                        else None)
        out.append(entry)
    return sorted(out, key=lambda s: -s["excess_ms_per_step"])


def _add_arrival_lag(entry: dict[str, Any], lags: Mapping[int, list[float]],
                     placement: Placement) -> None:
    """A straggler's arrival lag on one clock (median over steps of each step's
    :func:`_arrival_lags`) and its bound: the two ranks' alignment bounds; ``None``, with the
    reason, for a rank the alignment left on its own clock."""
    rank = entry["rank"]
    if not lags.get(rank):
        entry["arrival_lag_ms_per_step"] = None
        entry["arrival_lag_note"] = placement.entries.get(str(rank), {}).get(
            "reason", "it shares no collective with another aligned rank")
        return
    others = max((placement.bound_us(int(r)) for r in placement.entries if int(r) != rank),
                 default=0.0)
    entry["arrival_lag_ms_per_step"] = _round(statistics.median(lags[rank]))
    entry["arrival_lag_bound_ms"] = _round((placement.bound_us(rank) + others) / 1e3)


def _ranks_text(ranks: list[int]) -> str:
    """``rank 1``, ``ranks 0 and 2``, ``ranks 0, 2-127``: runs of 3 or more as a range."""
    words, start = [], 0
    for i, rank in enumerate(ranks):
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            run = ranks[start:i + 1]
            words += [f"{run[0]}-{run[-1]}"] if len(run) > 2 else [str(r) for r in run]
            start = i + 1
    joined = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    return ("rank " if len(ranks) == 1 else "ranks ") + joined


def _findings(means: Mapping[int, Mapping[str, float]], stragglers: list[dict[str, Any]],
              left_out: list[int]) -> list[dict[str, Any]]:
    """Plain-language findings, the ms per step at stake first. Where ranks of the job are
    ``left_out``, the ranks read may be waiting for them in what looks like exposed
    communication: the finding says so."""
    out = []
    for s in stragglers:
        where = WORDS[s["category"]]
        if s.get("host_gap_before"):
            where += f", mostly just before {s['host_gap_before']}"
        text = f"rank {s['rank']} is {s['excess_ms_per_step']:.1f} ms/step slower, in {where}"
        if s["waiting_ranks"]:
            verb = "waits" if len(s["waiting_ranks"]) == 1 else "wait"
            text += f"; {_ranks_text(s['waiting_ranks'])} {verb} for it"
            if s["waited_in"]:
                text += " in " + ", ".join(s["waited_in"])
        if s.get("arrival_lag_ms_per_step"):
            lag, bound = s["arrival_lag_ms_per_step"], s["arrival_lag_bound_ms"]
            text += (f" (it arrives {lag:.1f} ms after the others, on one host's clock)"
                     if not bound else
                     f" (on one clock it arrives {lag:.1f} ms after the others, ±{bound:.2g} ms)")
        out.append({"ms_per_step": s["excess_ms_per_step"], "rank": s["rank"],
                    "category": s["category"], "text": text})
    if means:
        step = _mean([m["step_ms"] for m in means.values()])
        where = f"on {_ranks_text(sorted(means))}" if len(means) == 1 or left_out else \
            "on every rank"
        if left_out:
            where += f" ({_ranks_text(left_out)} left out)"
        for part in ("host", "comm_exposed", "data", "other"):
            values = [_own(m, part) for m in means.values()]
            if step > 0 and min(values) >= FINDING_SHARE * step:
                ms = _mean(values)
                what = (f"exposed communication, perhaps waiting for {_ranks_text(left_out)},"
                        if part == "comm_exposed" and left_out else WORDS[part])
                out.append({"ms_per_step": _round(ms), "rank": None, "category": part,
                            "text": f"{what} takes {ms:.1f} ms/step on average, "
                                    f"{100 * ms / step:.0f} % of the step, {where}"})
    return sorted(out, key=lambda f: -f["ms_per_step"])


# --- trials ----------------------------------------------------------------------------------

def _telemetry(inputs: Mapping[int, RankInputs], warn: Warn) -> dict[int, list[RankRecord]]:
    """The benchmark's telemetry per rank, where it wrote it (read as the timeline reads it)."""
    return {rank: read_telemetry(found.jsonl, warn) for rank, found in sorted(inputs.items())
            if found.jsonl is not None}


def _injected(telemetry: Mapping[int, list[RankRecord]], steps: list[int]
              ) -> dict[str, dict[str, float]]:
    """The benchmark's ``injected_ms`` per rank, where its JSONL has them: the mean over the
    diagnosed steps (its ``global_step`` is the profiler's step number), else over all."""
    out, diagnosed_steps = {}, set(steps)
    for rank, rows in telemetry.items():
        totals: dict[str, list[float]] = defaultdict(list)
        diagnosed: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if row.injected_ms is UNSET:
                continue
            for k, v in row.injected_ms.items():
                totals[k].append(v)
                if row.global_step in diagnosed_steps:
                    diagnosed[k].append(v)
        totals = diagnosed or totals
        if totals:
            out[str(rank)] = {k: _round(_mean(v)) for k, v in totals.items()}
    return out


def _correct_clocks(traces: Mapping[int, RankTrace], telemetry: Mapping[int, list[RankRecord]],
                    warn: Warn) -> dict[str, dict[str, Any]]:
    """Each rank's Kineto clock held against the benchmark's wall clock by the rate of its
    ``aorta.iteration#N`` starts (:func:`~aorta_core.reports.clock_check.clock_rate`, as the
    timeline's clock check; ``ProfilerStep#N`` cannot serve, a profiler stepped on the optimizer
    puts it inside iterations). A rank whose trace ran at another rate is measured back, said in
    one line and in ``clock_corrections``."""
    out: dict[str, dict[str, Any]] = {}
    for rank, trace in traces.items():
        wall = {row.global_step: row.time_start_unix_ns for row in telemetry.get(rank, ())}
        rate = clock_rate({n: t * 1e3 for n, (t, _) in trace.iterations.items()}, wall)
        if rate is None or not rate.off:
            continue
        trace.rescale(rate.rate)
        out[str(rank)] = {"rate": round(rate.rate, 4), "steps": [rate.first, rate.last]}
        warn(f"rank {rank}: its Kineto trace's {rate.describe()}")
    return out


def _never_ran(record: Mapping[str, Any]) -> bool:
    """A trial whose payload was never started (a collector or the launch refused it)."""
    return (record.get("verdict") == "error" and record.get("exit_code") is None
            and record.get("wall_time_s") is None and not record.get("timed_out"))


def _failed(trial: Path, record: Mapping[str, Any] | None) -> str | None:
    """``<trial>: the trial failed (<its error>); ...`` for a trial that ran and failed, with
    the log to read; ``None`` for one that passed (or has no record)."""
    if record is None or record.get("verdict") not in ("fail", "error"):
        return None
    why = " ".join(str(record.get("error") or f"exit code {record.get('exit_code')}").split())
    log = trial / str(record.get("stderr") or "stderr.log")
    return f"{trial}: the trial failed ({why}); {log} has the whole error"


def _nothing_to_diagnose(trial: Path, record: Mapping[str, Any] | None,
                         inputs: Mapping[int, RankInputs], read: Mapping[int, RankTrace]) -> str:
    """Why a trial gives no diagnosis, in one line with the fix: no trace (deleted by its
    retention, or never profiled), none readable, or none with ``ProfilerStep#N``."""
    files = [t.source.path for found in inputs.values() for t in found.traces]
    unread = sum(t.unread for t in read.values()) + sum(
        len(inputs[rank].traces) for rank in set(inputs) - set(read))
    kept = (f"; the {DIAGNOSIS_NAME} already there is kept"
            if (trial / DIAGNOSIS_NAME).is_file() else "")
    deleted = ((record or {}).get("retention") or {}).get("deleted") or []
    if not files and deleted:
        level = record["retention"].get("level")
        return (f"{trial}: its traces were deleted after the run by its retention (level "
                f"{level}, {len(deleted)} path(s)){kept}; keep them with "
                f"retain.on_{record.get('verdict', 'pass')}=full, or diagnose during the "
                "sweep with diagnose=true")
    if not files and _failed(trial, record):
        return (f"{trial}: the failed trial left no Kineto trace with ProfilerStep#N ranges to "
                f"diagnose{kept}; fix its failure, then run it again")
    if not files:
        return (f"{trial}: no Kineto trace with ProfilerStep#N ranges to diagnose{kept}; "
                "profile the run: collector=torchprof in a sweep, or profiling.enabled=true "
                "when you run python -m aorta_core.benchmark yourself")
    if unread == len(files):
        return (f"{trial}: none of its {len(files)} Kineto trace(s) could be read (the lines "
                f"above say why){kept}; profile the run again")
    return (f"{trial}: its {len(files)} Kineto trace(s) ({relative(files[0], trial)}"
            f"{', ...' if len(files) > 1 else ''}) hold no ProfilerStep#N ranges to diagnose"
            f"{kept}; profile with a schedule (torch.profiler.profile(schedule=torch.profiler."
            "schedule(...))) and call prof.step() once per training step, as "
            "collector=torchprof does")


def diagnose_trial(trial: Path, record: Mapping[str, Any] | None = None,
                   hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                   min_excess_ms: float = MIN_EXCESS_MS, min_excess_pct: float = MIN_EXCESS_PCT,
                   warn: Warn = warning_line, failure_shown: bool = False
                   ) -> dict[str, Any] | None:
    """The diagnosis of one trial folder, or ``None`` (after a warning) when no rank has a
    Kineto trace with ``ProfilerStep#N`` ranges. A trial that failed is said to have failed
    first, and why, unless ``failure_shown`` (the sweep's trial line said it)."""
    trial = Path(trial).absolute()  # the collectors' sources are read relative to it
    if record is None:
        try:
            record = msgspec.to_builtins(load_record(trial / RECORD_NAME))
        except (FileNotFoundError, BadRecord):
            record = None
    notes: list[str] = []

    def note(line: str) -> None:
        notes.append(line)
        warn(line)

    if record is not None and _never_ran(record):
        warn(f"{trial}: the trial did not run ({record.get('error') or 'no exit code'}); "
             "nothing to diagnose")
        return None
    failed = _failed(trial, record)
    if failed:  # first: what its traces show comes after why it failed
        notes.append(failed)
        if not failure_shown:
            warn(failed)
    inputs = discover(trial, record, note, hook_timeout_s)
    read = read_ranks({rank: [t.source.path for t in found.traces]
                       for rank, found in inputs.items()}, trial, note)
    traces = {rank: trace for rank, trace in read.items() if trace.steps}
    if not traces:
        warn(_nothing_to_diagnose(trial, record, inputs, read))
        return None
    world = max((t.world_size or 0 for t in read.values()), default=0)
    left_out = sorted((set(inputs) | set(range(world))) - set(traces))
    if left_out:
        note(f"{_ranks_text(left_out)} of the job: no readable trace with profiled steps here; "
             f"the diagnosis covers {_ranks_text(sorted(traces))} only, and counts the "
             f"waiting for {_ranks_text(left_out)} as exposed communication")
    telemetry = _telemetry(inputs, note)
    corrections = _correct_clocks(traces, telemetry, note)
    placement = (fit_clocks(traces, traces, lambda _: None) if len(traces) > 1  # said in
                 else Placement("collectives"))  # diagnosis.json, warned by the timeline
    result = analyse(traces, min_excess_ms, min_excess_pct, left_out=left_out,
                     placement=placement)
    if not result["steps"]:
        note("the ranks' traces share no ProfilerStep number; nothing to compare")
    return {"schema_version": SCHEMA_VERSION, "trial": str(trial.resolve()),
            "definitions": "docs/diagnose.md",
            "thresholds": {"min_excess_ms": min_excess_ms, "min_excess_pct": min_excess_pct},
            **result, "left_out_ranks": left_out,
            "injected": _injected(telemetry, result["steps"]),
            "clock_corrections": corrections, "rank_alignment": placement.entries,
            "warnings": notes}


def write_diagnosis(trial: Path, record: Mapping[str, Any] | None = None,
                    hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
                    failure_shown: bool = False, **thresholds: float
                    ) -> tuple[Path, dict[str, Any]] | None:
    """``<trial>/diagnosis.json`` and what it holds; ``None`` when there was nothing to read."""
    result = diagnose_trial(trial, record, hook_timeout_s, failure_shown=failure_shown,
                            **thresholds)
    if result is None:
        return None
    path = Path(trial) / DIAGNOSIS_NAME
    write_atomic(path, dump_json(result))
    return path, result


def diagnose_step(cell: Cell) -> Callable[[Path, Mapping[str, Any]], None] | None:
    """The trial step that writes ``diagnosis.json`` when ``cell`` asks for it
    (``diagnose=true``), for :func:`aorta_core.engine.trial.run_trial`'s ``after_run``."""
    if not cell.diagnose:
        return None

    def step(trial_dir: Path, record: Mapping[str, Any]) -> None:
        try:  # the trial's results matter more than its diagnosis
            write_diagnosis(trial_dir, record, cell.hook_timeout_s, failure_shown=True)
        except Exception as exc:
            warning_line(f"no diagnosis for {trial_dir} ({exception_line(exc)})")
    return step
