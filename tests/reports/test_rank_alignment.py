"""The ranks' clocks (reports/rank_alignment.py) against ground truth, on real traces.

gloo ranks of the benchmark on one host stamp their Kineto traces with one clock, so every rank's
true offset and drift against rank 0 are 0. The same traces with one rank's times moved by a known
offset and drift, as if it ran on another host, must be placed back within the bound the
alignment states, at every collective it used. The benchmark runs FSDP (10 collectives a step),
profiling steps 2-11; torchrun runs once per rank count.

Measured on a 2-core VM shared with another job (torch 2.13, CPU): bounds of 333-349 us (2 ranks)
and 1.4-2.4 ms (4 ranks); untouched traces keep their clocks (every shared collective overlaps as
they stand, as on one host it must); moved by 0.1-100 ms and 50-100
ppm, rank 1 of 2 was placed back within 3-50 us of where it was at `about` (24-101 us at worst
over its collectives). gloo's ranges are long there (a collective's median range 3 ms, its
shortest 0.2 ms), and no bound can be narrower than they allow: the 200 us that the issue asks
of gloo ranks is not reached on such a host. Over the 1.2 s of collectives a drift of 100 ppm
moves a rank less than its ranges are wide, so the drift found is 0 and the bound allows for
the limit (200 ppm).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from needs import NO_GPU

from aorta_core.reports.collectives import matched
from aorta_core.reports.diagnose import diagnose_trial
from aorta_core.reports.rank_alignment import DRIFT_LIMIT_PPM, RankClock, align_ranks
from aorta_core.reports.rank_traces import RankTrace, read_ranks
from aorta_core.reports.timeline import build_timeline

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
BENCH = ["device=cpu", "parallel=fsdp", "training.max_steps=12", "data.batch_size=2",
         "data.sequence_length=4", "profiling.enabled=true", "profiling.wait=0",
         "profiling.warmup=2", "profiling.active=10", "telemetry.matmul_reference=false"]
#: What no bound of these tests may exceed (the widest measured was 2.4 ms, 4 ranks on 2 cores).
CEILING_US = 10_000.0


def _bench(trial: Path, nproc: int, *overrides: str) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
    proc = subprocess.run([TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m",
                           "aorta_core.benchmark", *BENCH, f"output_dir={trial / 'benchmark'}",
                           *overrides],
                          env={**env, **NO_GPU, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return trial


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    return _bench(tmp_path_factory.mktemp("two"), 2)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> Path:
    return _bench(tmp_path_factory.mktemp("four"), 4)


@pytest.fixture(scope="module")
def slow_rank_1(tmp_path_factory) -> Path:
    """2 ranks; rank 1 sleeps 50 ms before each step's data."""
    return _bench(tmp_path_factory.mktemp("slow"), 2, "inject.rank=1", "inject.host_ms=50")


def _file(trial: Path, rank: int) -> Path:
    (path,) = (trial / "benchmark" / "torch_profiler" / f"rank{rank}").glob("*.json")
    return path


def _read(trial: Path) -> dict[int, RankTrace]:
    ranks = sorted(int(p.name[4:]) for p in (trial / "benchmark" / "torch_profiler").iterdir())
    notes: list[str] = []
    traces = read_ranks({r: [_file(trial, r)] for r in ranks}, trial, notes.append)
    assert notes == [] and sorted(traces) == ranks
    return traces


def _rewrite(trial: Path, rank: int, to: Path, event: Callable[[dict], dict | None],
             host: str | None = None) -> Path:
    """A copy of the trial whose ``rank`` has each trace event replaced by ``event(it)`` (left
    out where that is ``None``), and its trace's ``host_name`` by ``host`` where given."""
    shutil.copytree(trial, to)
    path = _file(to, rank)
    doc = json.loads(path.read_text())
    doc["traceEvents"] = [e for e in map(event, doc["traceEvents"]) if e is not None]
    if host is not None:
        doc["host_name"] = host
    path.write_text(json.dumps(doc))
    return to


def _shared_ends(traces: dict[int, RankTrace], rank: int) -> list[float]:
    """Unix µs at which ``rank``'s collectives shared with rank 0 end, on its own clock."""
    pair = {0: traces[0], rank: traces[rank]}
    steps = sorted(set(traces[0].steps) & set(traces[rank].steps))
    return [traces[rank].base_ns / 1e3 + c.spans[rank][1] for c in matched(pair, steps)]


@pytest.mark.parametrize("ranks", ["two_ranks", "four_ranks"])
def test_ranks_of_one_host_are_found_on_one_clock(request, ranks):
    traces = _read(request.getfixturevalue(ranks))
    clocks = align_ranks(traces)
    assert clocks[0] == RankClock(0.0, 0.0, 0.0, 0, "reference rank", traces[0].base_ns / 1e3)
    for rank in sorted(traces)[1:]:
        clock = clocks[rank]
        assert isinstance(clock, RankClock), clock
        assert clock.collectives >= 90 and clock.method.startswith("collectives: ")
        assert 0 < clock.bound_us <= CEILING_US, clock
        # one host, one clock: the clocks as they are make every shared collective overlap
        assert (clock.offset_us, clock.drift_ppm) == (0.0, 0.0), clock
        assert clock.method.endswith("overlap; kept"), clock
        ends = _shared_ends(traces, rank)
        assert max(abs(clock.place(t) - t) for t in ends) <= clock.bound_us, clock


def _clock(offset_us: float, drift_ppm: float, about_us: float) -> Callable[[float], float]:
    """Another host's clock: ``offset_us`` ahead at Unix µs ``about_us``, ``drift_ppm`` fast."""
    return lambda t: about_us + offset_us + (t - about_us) * (1 + drift_ppm * 1e-6)


def _move(clock: Callable[[float], float], drift_ppm: float, base_us: float
          ) -> Callable[[dict], dict]:
    """What that ``clock`` makes of a trace event (its durations ``drift_ppm`` longer too);
    ``ts`` counts from ``base_us``."""
    def move(event: dict) -> dict:
        if "ts" in event:
            event["ts"] = clock(base_us + event["ts"]) - base_us
        if "dur" in event:
            event["dur"] *= 1 + drift_ppm * 1e-6
        return event
    return move


@pytest.mark.parametrize(("ranks", "rank", "offset_us", "drift_ppm"), [
    ("two_ranks", 1, 100.0, 50.0),
    ("two_ranks", 1, 10_000.0, -50.0),
    ("two_ranks", 1, 100_000.0, 100.0),
    ("four_ranks", 2, 100_000.0, -100.0),
])
def test_a_rank_moved_as_if_from_another_host_is_placed_back_within_its_bound(
        request, tmp_path, ranks, rank, offset_us, drift_ppm):
    trial = request.getfixturevalue(ranks)
    before = _read(trial)
    ends = _shared_ends(before, rank)
    about, rate = ends[0], 1 + drift_ppm * 1e-6
    moved = _clock(offset_us, drift_ppm, about)
    clock = align_ranks(_read(_rewrite(trial, rank, tmp_path / "moved", _move(
        moved, drift_ppm, before[rank].base_ns / 1e3))))[rank]
    assert isinstance(clock, RankClock), clock
    assert clock.bound_us <= CEILING_US, clock

    def back(t: float) -> float:  # the truth: one host, one clock
        return about + (t - about - offset_us) / rate
    assert max(abs(clock.place(moved(t)) - t) for t in ends) <= clock.bound_us, clock
    true_offset = back(clock.about_us) - clock.about_us
    assert abs(clock.offset_us - true_offset) <= clock.bound_us, (clock, true_offset)
    true_drift, span_us = (1 / rate - 1) * 1e6, moved(ends[-1]) - moved(ends[0])
    assert abs(clock.drift_ppm - true_drift) <= 2e6 * clock.bound_us / span_us, clock


def _without_collectives(event: dict) -> dict | None:
    name = event.get("name", "")
    return None if name.startswith(("gloo:", "c10d::")) else event


def test_a_rank_that_shares_no_collective_stays_on_its_own_clock(four_ranks, tmp_path):
    clocks = align_ranks(_read(_rewrite(four_ranks, 2, tmp_path / "t", _without_collectives)))
    assert clocks[2] == ("rank 2 shares no collective with rank 0 in the steps both profiled; "
                         "left on its own clock")
    assert isinstance(clocks[1], RankClock) and isinstance(clocks[3], RankClock)


def test_one_shared_collective_gives_an_offset_only(two_ranks, tmp_path):
    """Rank 1 keeps one collective and runs 10 ms ahead (as on another host). The one kept is
    the collective whose longer range of the two ranks is shortest: a first collective that
    waited 12 ms for the other rank (2 loaded cores) still overlapped after the move."""
    firsts = [_first_of_each_name_per_step(json.loads(_file(two_ranks, rank).read_text()))
              for rank in (0, 1)]
    _, ts, name = min((max(firsts[0][key][1], op[1]), op[0], key[1])
                      for key, op in firsts[1].items() if key in firsts[0])
    ahead = _move(_clock(10_000.0, 0.0, 0.0), 0.0, 0.0)

    def keep_one(event: dict) -> dict | None:
        kept = event if (event.get("ts"), event.get("name")) == (ts, name) else \
            _without_collectives(event)
        return None if kept is None else ahead(kept)
    traces = _read(_rewrite(two_ranks, 1, tmp_path / "t", keep_one))
    clock = align_ranks(traces)[1]
    assert isinstance(clock, RankClock), clock
    assert (clock.collectives, clock.drift_ppm) == (1, 0.0)
    assert clock.method.endswith("offset only (a drift needs two)")
    (end,) = _shared_ends(traces, 1)
    assert abs(clock.offset_us + 10_000.0) <= clock.bound_us and clock.about_us == end


def _first_of_each_name_per_step(doc: dict) -> dict[tuple[int, str], tuple[float, float]]:
    """(step, collective name) -> (ts, dur) of the step's first collective of that name: the
    ones a rank keeping only one still pairs right (the k-th of a name in a step is the same
    collective on every rank)."""
    events = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
                   if e.get("name", "").startswith("ProfilerStep#")
                   and e.get("cat") == "user_annotation")
    out: dict[tuple[int, str], tuple[float, float]] = {}
    for e in sorted((e for e in events if e.get("name", "").startswith("gloo:")),
                    key=lambda e: e["ts"]):
        step = next((n for start, end, n in steps if start <= e["ts"] < end), None)
        if step is not None:
            out.setdefault((step, e["name"]), (e["ts"], e.get("dur", 0.0)))
    return out


def test_a_clock_that_drifts_past_the_limit_is_left_on_its_own(two_ranks, tmp_path):
    """2 % fast: over the run's second of collectives no mapping within the limit makes their
    ranges overlap, and none is forced on the rank."""
    traces, drift_ppm = _read(two_ranks), 100 * DRIFT_LIMIT_PPM
    move = _move(_clock(0.0, drift_ppm, _shared_ends(traces, 1)[0]), drift_ppm,
                 traces[1].base_ns / 1e3)
    clock = align_ranks(_read(_rewrite(two_ranks, 1, tmp_path / "t", move)))[1]
    assert isinstance(clock, str), clock
    assert re.fullmatch(r"rank 1: no clock mapping within 200 ppm makes its \d+ shared "
                        r"collective\(s\) overlap rank 0's; left on its own clock", clock), clock


def _other_host(trial: Path, to: Path, offset_us: float, drift_ppm: float) -> Path:
    """A copy of ``trial`` whose rank 1 ran on a host ``offset_us`` ahead and ``drift_ppm``
    fast: its Kineto trace and its telemetry (``time_*_unix_ns``) both on that clock."""
    traces = _read(trial)
    about = _shared_ends(traces, 1)[0]
    clock = _clock(offset_us, drift_ppm, about)
    _rewrite(trial, 1, to, _move(clock, drift_ppm, traces[1].base_ns / 1e3), "another-host")
    (jsonl,) = (to / "benchmark").glob("rank_*1_metrics.jsonl")
    lines = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    for line in lines:
        for key in ("time_start_unix_ns", "time_end_unix_ns"):
            line[key] = round(clock(line[key] / 1e3) * 1e3)
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return to


def _gaps(timeline: Path) -> dict[str, float]:
    """Per benchmark iteration, how far after rank 0's slice of it rank 1's starts (µs): the
    timeline's origin may be either rank's first iteration, which the alignment moves."""
    events = json.loads(timeline.read_text())["traceEvents"]
    rank_of = {e["pid"]: int(e["args"]["name"].split()[1]) for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"
               and e["args"]["name"].startswith("rank ")}
    starts: dict[int, dict[str, float]] = {0: {}, 1: {}}
    for e in events:
        if e.get("pid") in rank_of and e.get("name", "").startswith("iteration "):
            starts[rank_of[e["pid"]]][e["name"]] = e["ts"]
    assert len(starts[0]) == 12 and starts[0].keys() == starts[1].keys(), starts
    return {k: starts[1][k] - starts[0][k] for k in starts[0]}


def test_the_timeline_puts_a_rank_of_another_host_back_on_rank_0s_clock(two_ranks, tmp_path):
    """Rank 1 moved 10 ms ahead and 50 ppm fast, trace and telemetry alike: with the default
    ``--align collectives`` its iterations land where the untouched trial's do against rank
    0's, within the two bounds the timelines state; ``--align host`` leaves them 10 ms off."""
    moved = _other_host(two_ranks, tmp_path / "moved", 10_000.0, 50.0)
    warnings: list[str] = []
    build_timeline(two_ranks, tmp_path / "same.json", warn=warnings.append)
    build_timeline(moved, tmp_path / "aligned.json", warn=warnings.append)
    build_timeline(moved, tmp_path / "host.json", warn=warnings.append, align="host")
    assert not [w for w in warnings if "rank 1" not in w], warnings
    same, aligned, host = (json.loads((tmp_path / f"{name}.json").read_text())["otherData"]
                           for name in ("same", "aligned", "host"))
    assert host["align"] == "host" and host["rank_alignment"] == {}
    assert aligned["align"] == "collectives"
    assert aligned["rank_alignment"]["0"]["method"] == "reference rank"
    entry = aligned["rank_alignment"]["1"]
    assert entry["method"].startswith("collectives: ") and entry["collectives"] >= 90
    assert abs(entry["offset_us"] + 10_000.0) <= entry["bound_us"], entry
    kept = same["rank_alignment"]["1"]  # one host, one clock: not fitted
    assert kept["method"].startswith("host: on rank 0's host (") and kept["bound_us"] == 0, kept
    bound = entry["bound_us"] + kept["bound_us"]
    truth, placed, unaligned = (_gaps(tmp_path / f"{name}.json")
                                for name in ("same", "aligned", "host"))
    assert max(abs(placed[k] - truth[k]) for k in truth) <= bound, (placed, truth, bound)
    assert min(unaligned[k] - truth[k] for k in truth) > 10_000.0 - bound, (unaligned, truth)


def test_a_timeline_whose_ranks_share_no_collective_says_it_once(two_ranks, tmp_path):
    """Rank 1 on another host without its collectives: on its own host's clock, in one line."""
    trial = _rewrite(two_ranks, 1, tmp_path / "t", _without_collectives, "another-host")
    warnings: list[str] = []
    build_timeline(trial, tmp_path / "t.json", warn=warnings.append)
    assert [w for w in warnings if "collective" in w] == [
        "no rank shares a collective with rank 0 in the steps both profiled; each stays on its "
        "own host's clock"]
    entry = json.loads((tmp_path / "t.json").read_text())["otherData"]["rank_alignment"]["1"]
    assert entry["method"] == "host" and "shares no collective" in entry["reason"]


def test_diagnose_measures_the_stragglers_lag_on_one_clock(slow_rank_1, tmp_path):
    """Issue 43: diagnose fits the ranks' clocks as the timeline does (``rank_alignment`` in
    diagnosis.json) and says how late the straggler arrives on that clock; with rank 1 moved as
    if from another host (10 ms ahead, 50 ppm fast) its lag stays where the untouched trial
    has it, within the bound stated, and agrees with what the others' waits say."""
    moved = _other_host(slow_rank_1, tmp_path / "moved", 10_000.0, 50.0)
    same, aligned = (diagnose_trial(trial, warn=lambda _: None) for trial in (slow_rank_1, moved))
    entry = aligned["rank_alignment"]["1"]
    assert entry["method"].startswith("collectives: ") and entry["collectives"] >= 90
    assert abs(entry["offset_us"] + 10_000.0) <= entry["bound_us"], entry
    assert same["rank_alignment"]["1"]["method"].startswith("host: on rank 0's host (")
    (before,), (after,) = same["stragglers"], aligned["stragglers"]
    assert before["rank"] == after["rank"] == 1 and before["arrival_lag_bound_ms"] == 0
    assert after["arrival_lag_bound_ms"] == pytest.approx(entry["bound_us"] / 1e3, abs=1e-3)
    assert abs(after["arrival_lag_ms_per_step"] - before["arrival_lag_ms_per_step"]) \
        <= after["arrival_lag_bound_ms"] + 0.001, (before, after)
    # what the waits (durations) say, on one host: rank 0 waits about as long as rank 1 lags
    # (within 21 % with the suite's other tests on the same 2 cores: 47.6 against 60.4 ms)
    assert before["arrival_lag_ms_per_step"] == pytest.approx(before["wait_ms_per_step"]["0"],
                                                              rel=0.3), before
    assert before["arrival_lag_ms_per_step"] == pytest.approx(50, rel=0.2), before
    assert "arrives" in next(f["text"] for f in aligned["findings"] if f["rank"] == 1)
