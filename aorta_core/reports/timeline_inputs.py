"""What goes on a trial's merged timeline, rank by rank: the built-in benchmark's own files, the
trace files each collector that ran names through its ``timeline_sources`` hook, and any other
Kineto trace in the folder (a workload's own ``torch.profiler`` output, or a folder of traces
given as it is).

The core knows no collector by name: it asks every collector the trial's record lists, with the
options it ran with, one at a time and isolated as every hook is
(:func:`~aorta_core.engine.isolation.call_hook`), and places each file by the clock the collector
declares. A collector that raises, hangs, or answers anything but a list of ``TimelineSource``
costs one warning and its lanes, never the timeline.
"""

from __future__ import annotations

import math
import os
import re
import stat
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from aorta_core.api.bom import BOM
from aorta_core.api.contracts import TimelineSource
from aorta_core.api.files import FileRefused, files_under, open_limited, read_limited, walk
from aorta_core.api.oneline import exception_line, named_once
from aorta_core.api.ranks import rank_from_name, rank_in_head
from aorta_core.benchmark.schema import RankRecord, decode_line
from aorta_core.engine.attempts import ATTEMPTS_DIR
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S, call_hook
from aorta_core.engine.records import RECORD_NAME
from aorta_core.reports.overlap_report import GLOB as JSONL_GLOB
from aorta_core.reports.trace_events import TIME_LIMIT_US, UNIX_NS_LIMIT

Warn = Callable[[str], None]

#: The built-in benchmark's own profiler (its ``profiling`` block) writes Kineto traces here.
BENCHMARK_KINETO_DIR = "benchmark/torch_profiler"
#: Kineto's CPU clock vs ``time.time_ns()`` on one host: within [-2.1, +3.2] µs over 2000
#: ranges (torch 2.13, docs/reports.md); the bound we state for Kineto events.
KINETO_BOUND_MS = 0.005
#: Where each source's lanes sort within a rank: the benchmark, its Kineto, then collectors.
BENCHMARK_POSITION, KINETO_POSITION, FIRST_COLLECTOR_POSITION = 0, 1, 2
CLOCKS = ("unix", "relative")
SPANS = ("iterations", "run")
_LEFT_OUT = "its traces are left out of the timeline"


@dataclass(frozen=True)
class Trace:
    """One trace file to place: whose it is (``kind``, in ``otherData.sources``; ``label``
    starts its lanes' names), where its lanes sort in a rank, and how it is placed."""

    kind: str
    label: str
    position: int
    source: TimelineSource


@dataclass
class RankInputs:
    jsonl: Path | None = None
    traces: list[Trace] = field(default_factory=list)


def _regular(paths: Iterable[Path]) -> list[Path]:
    """The regular files among ``paths``, never a link (aorta reads no links); a path that
    cannot be looked at (``ENAMETOOLONG`` thousands of folders down) is none."""
    return sorted(p for p in paths if _is(stat.S_ISREG, p, os.lstat))


def _is(kind: Callable[[int], bool], path: Path, look: Callable[[Path], os.stat_result] = os.stat
        ) -> bool:
    """Whether ``path`` is of ``kind`` (``stat.S_ISREG``, ...) as ``look`` sees it; not when it
    cannot be looked at."""
    try:
        return kind(look(path).st_mode)
    except OSError:
        return False


def _kineto_trace(path: Path) -> Trace:
    return Trace("kineto", "Kineto", KINETO_POSITION,
                 TimelineSource(path, clock="unix", error_bound_ms=KINETO_BOUND_MS))


def _benchmark_kineto(trial: Path, warn: Warn) -> list[Trace]:
    found = files_under(trial / BENCHMARK_KINETO_DIR, note=warn)
    return [_kineto_trace(path) for path in _regular(found)
            if path.name.endswith((".json", ".json.gz"))]


#: How a Kineto trace begins (torch.profiler's exports, old and new, and HTA's test data): its
#: schema version is its first key. aorta's merged timeline and other chrome traces begin
#: otherwise, and are never taken for a rank's trace.
_KINETO_HEAD = re.compile(rb'\s*\{\s*"schemaVersion"\s*:')


def read_telemetry(path: Path, warn: Warn) -> list[RankRecord]:
    """A rank's benchmark telemetry (its JSONL's records), by start time; lines of another
    schema are skipped, with one line."""
    try:
        lines = read_limited(path).splitlines()  # a FIFO, a device or a huge file is refused
    except FileRefused as exc:
        warn(f"skipping {exc}")
        return []
    except OSError as exc:
        warn(f"skipping {path}: {exc.strerror}")
        return []
    out, bad, far = [], [], []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                record = decode_line(line)
            except (msgspec.DecodeError, RecursionError):  # RecursionError: 1000s deep
                bad.append(number)
                continue
            if _on_the_clock(record):
                out.append(record)
            else:
                far.append(number)
    if bad:
        warn(f"{path}: {len(bad)} line(s) skipped, not aorta's benchmark telemetry "
             f"(first: line {bad[0]})")
    if far:
        warn(f"{path}: {len(far)} line(s) skipped, their times lie beyond 2^63 ns (292 years) "
             f"or end before they start, on no clock (first: line {far[0]})")
    return sorted(out, key=lambda r: r.time_start_unix_ns)


def _on_the_clock(record: RankRecord) -> bool:
    """Whether a telemetry line's times can be placed: its Unix stamps within 2^63 ns and in
    order, and every ms it hangs from them (ranges, the injected delays) within that too."""
    if not 0 <= record.time_start_unix_ns <= record.time_end_unix_ns < UNIX_NS_LIMIT:
        return False
    ms = [*record.injected_ms.values()] if record.injected_ms is not UNSET else []
    if record.profile is not UNSET:
        ms += [record.profile.total_ms]
        ms += [t for r in record.profile.ranges for t in (r.start_ms, r.end_ms)]
    limit = TIME_LIMIT_US / 1e3
    return all(-limit <= t <= limit for t in ms)


def _begins_as_kineto(path: Path, trial: Path) -> bool:
    """Whether the file starts as a Kineto trace; one that cannot be read is taken for one, so
    that its reader says why (too big, a broken .gz) instead of its silently missing."""
    try:
        with open_limited(path, trial) as fh:
            head = fh.read(256)
    except (OSError, EOFError, zlib.error):
        return True
    return _KINETO_HEAD.match(head.removeprefix(BOM)) is not None


def _unclaimed_kineto(trial: Path, claimed: set[Path], warn: Warn) -> list[Trace]:
    """The Kineto traces in the trial outside the ``claimed`` folders (the benchmark's
    profiler's, and each collector's that ran) and its earlier attempts: what a workload's own
    ``torch.profiler`` wrote into ``$AORTA_TRIAL_DIR``, or a folder of traces given as it is."""
    found, trials = [], []
    for folder, dirs, files in walk(trial, note=warn):  # links to folders are not followed
        here = Path(folder)  # another trial inside is not this one's, nor its earlier attempts
        if here == trial and ATTEMPTS_DIR in dirs:
            dirs.remove(ATTEMPTS_DIR)
        inside = sorted(d for d in dirs if _is(stat.S_ISREG, here / d / RECORD_NAME))
        trials += [here / d for d in inside]
        dirs[:] = sorted(d for d in dirs if here / d not in claimed and d not in inside)
        named = sorted(here / name for name in files if name.endswith((".json", ".json.gz")))
        for path in named:
            if _is(stat.S_ISLNK, path, os.lstat):
                warn(f"{path}: skipped, a link (aorta reads no links: copy the file there)")
        found += [_kineto_trace(path) for path in _regular(named)
                  if _begins_as_kineto(path, trial)]
    if trials:
        warn(f"{trial}: {len(trials)} trial folder(s) inside it (first: "
             f"{trials[0].relative_to(trial)}) are other runs and not read with it; give a "
             "sweep's output, a cell's or a trial's folder to read those")
    return found


def discover(trial: Path, record: Mapping[str, Any] | None, warn: Warn,
             hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S) -> dict[int, RankInputs]:
    """Every source of a trial by rank. A file's rank is the one its collector states, else
    Kineto's ``distributedInfo.rank`` in its head, else a ``rank<R>`` in its name or a folder's
    inside the trial, never one of the folders above it; a file named twice is placed once."""
    ranks: dict[int, RankInputs] = defaultdict(RankInputs)
    for path in _regular((trial / "benchmark").glob(JSONL_GLOB)):
        ranks[rank_from_name(path.relative_to(trial))].jsonl = path
    traces = _benchmark_kineto(trial, warn)
    claimed = {trial / BENCHMARK_KINETO_DIR}  # and each collector's folder: its own to name
    for position, (name, sources) in enumerate(_collector_sources(trial, record, warn,
                                                                  hook_timeout_s),
                                               FIRST_COLLECTOR_POSITION):
        traces += [Trace(name, name, position, source) for source in sources]
        claimed.add(trial / name)
    traces += _unclaimed_kineto(trial, claimed, warn)
    seen: set[Path] = set()
    for trace in traces:
        path = trace.source.path
        if path not in seen:
            seen.add(path)
            rank = trace.source.rank
            if rank is None:
                rank = rank_in_head(path, trial)
            ranks[rank_from_name(path.relative_to(trial)) if rank is None else rank
                  ].traces.append(trace)
    return dict(ranks)


def _recorded(record: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The collectors a trial's record says it ran, with the options they ran with."""
    collectors = record.get("collectors")
    if not isinstance(collectors, Mapping):
        return {}
    out = {}
    for name, entry in collectors.items():
        options = entry.get("options") if isinstance(entry, Mapping) else None
        out[str(name)] = options if isinstance(options, Mapping) else {}
    return out


def _collector_sources(trial: Path, record: Mapping[str, Any] | None, warn: Warn,
                       hook_timeout_s: float | None) -> Iterator[tuple[str, list[TimelineSource]]]:
    """Each collector that ran and whose folder is in the trial, and the sources it names (none
    where it cannot be asked: a warning says why). Without a record, the installed collectors
    whose artifact folder is in the trial, with their defaults."""
    from aorta_core.engine.plugins import PluginLoadError, load_registry, option_names

    ran = _recorded(record) if record is not None else {
        name: {} for name in option_names() if (trial / name).is_dir()}
    for name, values in sorted(ran.items()):
        folder = trial / name
        if not folder.is_dir():
            continue  # nothing kept of it (retention) or never made
        sources: list[TimelineSource] = []
        try:  # only the collectors that ran are imported
            registry = load_registry(only=name)
        except PluginLoadError as exc:  # AORTA_STRICT_PLUGINS=1 and it failed to load
            warn(named_once(name, f"{exc}; {_LEFT_OUT}"))
        else:
            if name in registry.collectors:
                sources = _ask(registry, name, folder, values, trial, warn, hook_timeout_s)
            else:
                failed = [s.error for s in registry.statuses if s.error]
                why = f"unusable here ({failed[0]})" if failed else \
                    "not installed here (see `aorta plugins`)"
                warn(named_once(name, f"{why}, so {_LEFT_OUT}"))
        yield name, sources


def _ask(registry: Any, name: str, folder: Path, values: Mapping[str, Any], trial: Path,
         warn: Warn, hook_timeout_s: float | None) -> list[TimelineSource]:
    """``timeline_sources`` of one collector, isolated; its checked answer, or ``[]`` after
    one warning."""
    from aorta_core.engine.plugins import collector_options

    try:
        options = collector_options(registry.collectors[name].info.options, values)
    except Exception as exc:  # options renamed since the run, or values of another type
        warn(named_once(name, f"its recorded options do not fit its options now "
                              f"({exception_line(exc)}), so {_LEFT_OUT}"))
        return []
    outcome = call_hook(lambda: _answer(registry.call(
        name, "timeline_sources", artifact_dir=folder, options=options), folder, trial),
        hook_timeout_s)
    for message in outcome.warnings:
        warn(named_once(name, message))
    if outcome.failure is not None:
        warn(named_once(name, f"timeline_sources failed: {outcome.failure}; {_LEFT_OUT}"))
        return []
    if isinstance(outcome.value, str):
        warn(named_once(name, f"timeline_sources returned {outcome.value}; {_LEFT_OUT}"))
        return []
    return outcome.value


def _answer(value: Any, folder: Path, trial: Path) -> list[TimelineSource] | str:
    """In the hook's process: :func:`checked`, or what is wrong with the answer."""
    try:
        return checked(value, folder, trial)
    except ValueError as exc:
        return str(exc)


def checked(value: Any, folder: Path, trial: Path) -> list[TimelineSource]:
    """The sources of a ``timeline_sources`` answer, paths made absolute and every field its
    plain type; ``ValueError`` naming the first thing wrong (``None``: the collector does not
    implement the hook)."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"a {type(value).__name__}, not a list of TimelineSource")
    out = []
    for item in value:
        problem = _problem(item)
        if problem is not None:
            raise ValueError(problem)
        path = Path(os.path.normpath(folder / item.path))
        if not path.is_relative_to(trial):
            raise ValueError(f"{str(item.path)!r}, outside the trial's folder {trial}")
        out.append(TimelineSource(
            path=path, clock=str.__str__(item.clock), span=str.__str__(item.span),
            rank=None if item.rank is None else int.__int__(item.rank),
            error_bound_ms=float(item.error_bound_ms), thread_name=str.__str__(item.thread_name),
            marks=tuple((str.__str__(name), int.__int__(low), int.__int__(high))
                        for name, low, high in item.marks)))
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _problem(item: Any) -> str | None:
    """What makes ``item`` no usable ``TimelineSource``, in words; ``None`` when it is one."""
    if not isinstance(item, TimelineSource):
        return f"a {type(item).__name__} in its list, not a TimelineSource"
    if not isinstance(item.path, str | os.PathLike) or not str(item.path):
        return f"path {item.path!r}, not a file's path"
    if item.clock not in CLOCKS:
        return f"clock {item.clock!r} for {item.path}; use one of {', '.join(CLOCKS)}"
    if item.span not in SPANS:
        return f"span {item.span!r} for {item.path}; use one of {', '.join(SPANS)}"
    if item.rank is not None and not (isinstance(item.rank, int) and not isinstance(item.rank, bool)
                                      and item.rank >= 0):
        return f"rank {item.rank!r} for {item.path}; use an int >= 0 or None"
    bound = item.error_bound_ms
    if not (_number(bound) and math.isfinite(bound) and bound >= 0):
        return f"error_bound_ms {bound!r} for {item.path}; use a finite number >= 0"
    if not isinstance(item.thread_name, str):
        return f"thread_name {item.thread_name!r} for {item.path}; use text"
    return _marks_problem(item)


def _marks_problem(item: TimelineSource) -> str | None:
    marks = item.marks
    fix = f"for {item.path}; use (event name, not before, not after) tuples of Unix ns"
    if not isinstance(marks, list | tuple):
        return f"marks {marks!r} {fix}"
    for mark in marks:
        if not (isinstance(mark, list | tuple) and len(mark) == 3 and isinstance(mark[0], str)
                and all(isinstance(t, int) and not isinstance(t, bool)
                        and 0 <= t < UNIX_NS_LIMIT for t in mark[1:]) and mark[1] <= mark[2]):
            return f"mark {mark!r} {fix} (not before <= not after)"
    if marks and item.clock != "relative":
        return f"marks for {item.path}, whose clock is {item.clock!r}; marks place a relative one"
    return None
