"""Issue 40, items 7 and 11: ``aorta diagnose`` and ``aorta timeline`` on hostile traces,
records and command lines, through the real CLI.

An op name of megabytes costs time in proportion to its length (timed against the same trace
with short names, in the same run: no absolute timing); times off every clock (``1e308``), a
record's start of ``1e300``, ``args`` thousands of levels deep and a trial 3,000 folders deep cost
their own events, file or folders and one line each, never a traceback or an absurd timeline; a
selection of 1e11 steps is no list of them, and a window of ``nan`` is a usage error.

Hardware: none. The traces are real ones of a 2-rank gloo run on the CPU
(fixtures/kineto_clock_5x), with events added.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_helpers import memory_limit
from reports.report_helpers import CLOCK_5X

#: Address space of each child: a command that builds what it should not (1e11 ints) fails
#: with MemoryError instead of taking the machine's memory.
_MEMORY = 4 << 30


def _run(*args: str, cwd: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """``aorta <args>`` in a child of bounded memory, and its wall time; ``inf``, and no
    process, when it ran past ``timeout``: then its process group (its worker processes with
    it) is killed, as a quadratic reader would otherwise run on for hours."""
    start = time.perf_counter()
    with subprocess.Popen([sys.executable, "-m", "aorta_core", *args], cwd=cwd,
                          env={**os.environ, "AORTA_REPORT_PNG": "0"}, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True, preexec_fn=memory_limit(_MEMORY)) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return subprocess.CompletedProcess(args, -1, "", "timed out"), float("inf")
    return subprocess.CompletedProcess(args, child.returncode, out, err), \
        time.perf_counter() - start


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def _trial(where: Path) -> Path:
    trial = where / "trial"
    shutil.copytree(CLOCK_5X, trial)
    return trial


def _trace_path(trial: Path, rank: int) -> Path:
    return trial / f"benchmark/torch_profiler/rank{rank}/rank{rank}.step8.pt.trace.json.gz"


def _trace(trial: Path, rank: int) -> dict:
    return json.loads(gzip.decompress(_trace_path(trial, rank).read_bytes()))


def _write_trace(trial: Path, rank: int, doc: dict, raw_events: list[str] = ()) -> None:
    """The trace back, with ``raw_events`` (JSON text, as ``json.dumps`` cannot write it) after
    its events."""
    text = json.dumps(doc)
    if raw_events:
        text = text.replace('"traceEvents": [', '"traceEvents": [' + ",".join(raw_events) + ",",
                            1)
    _trace_path(trial, rank).write_bytes(gzip.compress(text.encode(), compresslevel=1))


def _step(doc: dict, n: int) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("name") == f"ProfilerStep#{n}")


def _diagnosis(trial: Path, tmp_path: Path) -> dict:
    done, _ = _run("diagnose", str(trial), "--json", cwd=tmp_path)
    _ok(done)
    (found,) = json.loads(done.stdout)
    return found


def _timeline(trial: Path, tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / f"timeline_{len(list(tmp_path.glob('timeline_*')))}.json"
    done, _ = _run("timeline", str(trial), "--output", str(out), *args, cwd=tmp_path)
    _ok(done)
    return json.loads(out.read_text()), done.stderr


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "clock ran" not in line
            and line.startswith("aorta: warning: ")]


# -- item 7: names of megabytes ---------------------------------------------------------------

#: Shapes of names that test the readers' name rules (regular expressions, prefixes, numbers,
#: brackets), each as long as asked.
SHAPES = [
    ("user_annotation", lambda n: "DataLoader" * (n // 10) + "__next__"),
    ("user_annotation", lambda n: "DataLoader" * (n // 10)),
    ("cpu_op", lambda n: "aten::" + "a" * n),
    ("cpu_op", lambda n: "c10d::" + "gloo:" * (n // 5)),
    ("user_annotation", lambda n: "ProfilerStep#" + "7" * n),
    ("user_annotation", lambda n: "aorta.iteration#" + "1" * n),
    ("user_annotation", lambda n: "## Call CompiledFxGraph" * (n // 23)),
    ("cpu_op", lambda n: "<(" * (n // 2) + "::x"),
]


def _named_trial(where: Path, length: int, longest: int) -> Path:
    """The real traces with, on rank 0's step thread in step 3, one event of each shape of
    ``length`` characters and one ``DataLoader``-repeating name of ``longest``."""
    trial = _trial(where)
    doc = _trace(trial, 0)
    step = _step(doc, 3)
    at = {k: step[k] for k in ("pid", "tid")}
    names = [(cat, shape(length)) for cat, shape in SHAPES]
    names.append(("user_annotation", "DataLoader" * (longest // 10)))
    doc["traceEvents"] += [{"ph": "X", "cat": cat, "name": name, **at,
                            "ts": step["ts"] + 10.0 * (i + 1), "dur": 5.0}
                           for i, (cat, name) in enumerate(names)]
    _write_trace(trial, 0, doc)
    return trial


def test_names_of_megabytes_cost_time_in_proportion_to_their_length(tmp_path):
    """A 640 KB name and a 4 MB one (each shape of name the readers test) against the same
    trace with 64-character names: ``aorta diagnose`` took 28 s for one 640 KB name (a regular
    expression searched it again from every ``DataLoader`` in it), far more for MBs; now each
    command is within 5x of its time on the short names, and reads the long names as it reads
    the short ones (a data-loading range is one)."""
    short = _named_trial(tmp_path / "short", 64, 640)
    long = _named_trial(tmp_path / "long", 640_000, 4_000_000)
    for command in ("diagnose", "timeline"):
        reference = min(_run(command, str(short), cwd=tmp_path)[1] for _ in range(2))
        done, took = _run(command, str(long), cwd=tmp_path, timeout=5 * reference)
        _ok(done)
        assert took <= 5 * reference, (command, took, reference)
    theirs, mine = (json.loads((trial / "diagnosis.json").read_text()) for trial in (short, long))
    assert mine["ranks"]["0"]["steps"] == theirs["ranks"]["0"]["steps"]
    without = _diagnosis(_trial(tmp_path / "without"), tmp_path)

    def data_ms(found: dict) -> float:
        return next(s["data_ms"] for s in found["ranks"]["0"]["steps"] if s["step"] == 3)
    assert data_ms(mine) > data_ms(without)  # the DataLoader...__next__ range is data


def _many(trial: Path, steps: int, events: int, threads: bool) -> Path:
    """Two ranks' traces of ``steps`` steps of 1 ms, ``events`` ops spread over them, each
    followed by a gloo collective, on the step's thread or each on a thread of its own."""
    trial.mkdir(parents=True)
    for rank in (0, 1):
        trace = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
                  "tid": 1, "ts": 1000.0 * n, "dur": 1000.0} for n in range(1, steps + 1)]
        for i in range(events):
            at = {"pid": 1, "tid": 2 + i if threads else 1,
                  "ts": 1000.0 + 1000.0 * steps * i / events}
            trace += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", **at, "dur": 0.1},
                      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", **at,
                       "ts": at["ts"] + 0.2, "dur": 0.1}]
        (trial / f"rank{rank}.pt.trace.json").write_text(json.dumps(
            {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2},
             "traceEvents": trace}))
    return trial


@pytest.mark.parametrize(("reference", "hostile", "what"), [
    ((3, 100_000, False), (3, 100_000, True), "100,000 threads, 100,000 ops on one"),
    ((4_000, 4_000, False), (16_000, 16_000, False), "16,000 steps, 4,000"),
], ids=["threads", "steps"])
def test_many_threads_or_steps_cost_time_in_proportion(tmp_path, reference, hostile, what):
    """``aorta diagnose`` of ops each on a thread of its own against the same ops on one thread
    (was 47 s against 1.2 s: every event tested once per thread), and of 4x the steps and
    collectives (was 14.3 s against 1.8 s: every collective tested once per step): within 5x."""
    short, long = (_many(tmp_path / name, *shape) for name, shape in (("reference", reference),
                                                                      ("hostile", hostile)))
    took = min(_run("diagnose", str(short), cwd=tmp_path)[1] for _ in range(2))
    done, longer = _run("diagnose", str(long), cwd=tmp_path, timeout=5 * took)
    _ok(done)
    assert longer <= 5 * took, (what, longer, took)


def test_spans_of_every_thread_at_once_answer_as_each_thread_alone() -> None:
    """What the diagnosis does for all threads at once (an op inside a collective of its own
    thread is not compute) against its definition, on 2,000 random small traces: shared,
    touching and empty spans, ties, missing times (NaN)."""
    import numpy as np

    from aorta_core.reports.trace_columns import _inside_own_thread

    rng = np.random.default_rng(40)
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        ts = rng.integers(0, 20, n) + rng.choice([0.0, 0.5], n)
        ts[rng.random(n) < 0.05] = np.nan
        end = ts + rng.integers(0, 6, n)
        col = SimpleNamespace(ts=ts, end=end, thread=rng.integers(0, 4, n))
        spans, points = (rng.random(n) < 0.4) & (end >= ts), rng.random(n) < 0.6
        x = (ts + end) / 2
        expected = [any(spans[j] and col.thread[j] == col.thread[i] and ts[j] <= x[i] < end[j]
                        for j in range(n)) for i in np.flatnonzero(points)]
        assert _inside_own_thread(col, spans, points, x).tolist() == expected


# -- item 11: times off every clock -----------------------------------------------------------

def _off_the_clock(trial: Path) -> None:
    """Rank 0's trace with events whose ts or dur is near the float limit (a step and an
    iteration marker among them), a record whose start and wall time are 1e300, and telemetry
    lines whose stamps or ranges lie past 2^63 ns; none of them is any other event."""
    doc = _trace(trial, 0)
    step = _step(doc, 3)
    at = f'"pid": {step["pid"]}, "tid": {step["tid"]}'
    inside = step["ts"] + 100
    _write_trace(trial, 0, doc, [
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", {at}, "ts": 1.7e308, "dur": 1}}',
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", {at}, "ts": {inside}, '
        '"dur": 1.7e308}',
        f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", {at}, '
        '"ts": -1.7e308, "dur": 1}',
        f'{{"ph": "X", "cat": "user_annotation", "name": "aorta.iteration#3", {at}, '
        f'"ts": {inside}, "dur": 1.7e308}}',
        f'{{"ph": "i", "s": "t", "name": "marker", {at}, "ts": 1e300}}',
    ])
    (trial / "record.json").write_text(json.dumps({
        "schema_version": 1, "cell": "default", "trial": 0, "verdict": "pass",
        "started_at_unix": 1e300, "wall_time_s": 1e300}))
    jsonl = trial / "benchmark" / "rank_00_metrics.jsonl"
    line = json.loads(jsonl.read_text().splitlines()[3])
    late = {**line, "global_step": 99, "time_start_unix_ns": 2**63 - 10,
            "time_end_unix_ns": 2**63 - 1}
    ranged = {**line, "global_step": 98}
    ranged["profile"]["ranges"][0]["end_ms"] = 1.7e308
    with jsonl.open("a") as fh:
        fh.write(json.dumps(late) + "\n" + json.dumps(ranged) + "\n")


def test_times_off_every_clock_cost_their_own_events_and_one_line(tmp_path):
    """The same timeline and diagnosis as without the hostile values, one line per file naming
    what was left out (was: an OverflowError traceback, or steps broken down over inf)."""
    clean = _trial(tmp_path / "clean")
    hostile = _trial(tmp_path / "hostile")
    _off_the_clock(hostile)
    trace, jsonl = _trace_path(hostile, 0), hostile / "benchmark" / "rank_00_metrics.jsonl"
    skipped_lines = (f"aorta: warning: {jsonl}: 2 line(s) skipped, their times lie beyond 2^63 "
                     "ns (292 years) or end before they start, on no clock (first: line 9)")

    expected, _ = _timeline(clean, tmp_path)
    found, stderr = _timeline(hostile, tmp_path)
    assert found["traceEvents"] == expected["traceEvents"]
    for key in ("origin_unix_ns", "origin", "clock_checks"):
        assert found["otherData"][key] == expected["otherData"][key], key
    assert _warnings(stderr) == [
        f"aorta: warning: {hostile}/record.json: started_at_unix 1e+300 is no Unix time in "
        "seconds (0 to 2^63 ns); the timeline's origin is the first benchmark iteration instead",
        f"aorta: warning: {trace}: 5 event(s) left out: their ts or dur lies beyond 2^63 ns (292 "
        "years), on no clock", skipped_lines]

    expected = _diagnosis(clean, tmp_path)
    done, _ = _run("diagnose", str(hostile), "--json", cwd=tmp_path)
    _ok(done)
    (found,) = json.loads(done.stdout)
    for key in ("steps", "ranks", "stragglers", "findings", "clock_corrections"):
        assert found[key] == expected[key], key
    assert _warnings(done.stderr) == [
        f"aorta: warning: {trace}: 4 event(s) left out: their ts or dur lies beyond 2^63 ns (292 "
        "years), on no clock", skipped_lines]


# -- item 11: nesting and folders -------------------------------------------------------------

def _deep_folders(top: Path, levels: int) -> None:
    """``top/a/a/...`` ``levels`` deep, made through folder descriptors (the path itself is
    past what the kernel takes in one call)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("a", dir_fd=fd)
        inner = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def _remove_deep(top: Path) -> None:
    """Undo :func:`_deep_folders` from the bottom up (``shutil.rmtree`` recurses, and pytest's
    clean-up would stop at its recursion limit)."""
    fds = [os.open(top, os.O_RDONLY)]
    while "a" in os.listdir(fds[-1]):
        fds.append(os.open("a", os.O_RDONLY, dir_fd=fds[-1]))
    os.close(fds.pop())
    while fds:
        os.rmdir("a", dir_fd=fds[-1])
        os.close(fds.pop())


@pytest.fixture
def deep_trial(tmp_path):
    """The real traces in a trial 3,000 folders deep twice (beside them and under the trial),
    rank 1's trace with one event whose ``args`` nest 50,000 levels: past what msgspec decodes
    on any Python (its C recursion limit: 1,000 on 3.11, 8,000 on 3.12, which read 5,000)."""
    trial = _trial(tmp_path)
    doc = _trace(trial, 1)
    _write_trace(trial, 1, doc, ['{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1, '
                                 '"args": ' + "[" * 50_000 + "]" * 50_000 + "}"])
    tops = [trial / "deep", trial / "benchmark" / "torch_profiler" / "deep"]
    for top in tops:
        _deep_folders(top, 3000)
    yield trial
    for top in tops:
        _remove_deep(top)


def test_args_50000_deep_and_3000_folders_cost_one_line_each(deep_trial, tmp_path):
    """Rank 1's trace is skipped with one line (msgspec's recursion limit: was a RecursionError
    traceback), the folders past 64 levels are named once per folder searched (``os.walk`` and
    ``Path.rglob`` recursed past Python's limit), and rank 0 is merged and diagnosed."""
    trace = _trace_path(deep_trial, 1)
    unreadable = "not a chrome trace aorta can read (JSON nested too deeply)"
    folders = [f"aorta: warning: {top}: 1 folder(s) more than 64 levels deep not read"
               for top in (deep_trial / "benchmark" / "torch_profiler", deep_trial)]
    doc, stderr = _timeline(deep_trial, tmp_path)
    assert [w for w in _warnings(stderr) if "levels deep" in w] == folders
    assert f"aorta: warning: skipping {trace}: {unreadable}" in _warnings(stderr)
    assert sorted((s["rank"], s["kind"]) for s in doc["otherData"]["sources"]) == [
        (0, "benchmark"), (0, "kineto"), (1, "benchmark")]

    done, _ = _run("diagnose", str(deep_trial), "--json", cwd=tmp_path)
    _ok(done)
    assert f"aorta: warning: {trace}: skipped, {unreadable}" in _warnings(done.stderr)
    assert [w for w in _warnings(done.stderr) if "levels deep" in w] == folders
    (found,) = json.loads(done.stdout)
    assert list(found["ranks"]) == ["0"] and found["left_out_ranks"] == [1]


# -- item 11: selections ----------------------------------------------------------------------

def test_a_selection_of_1e11_steps_is_one_run_and_a_window_must_be_finite(tmp_path):
    """``--steps 2-99999999999`` keeps what ``--steps 2-7`` keeps (the telemetry's last step is
    7) without a list of 1e11 steps (was: every int of the range in a set: a MemoryError under
    this test's 4 GiB); a window or step that is no finite number is a usage error, exit 2,
    nothing written."""
    trial = _trial(tmp_path)
    wide, _ = _timeline(trial, tmp_path, "--steps", "2-99999999999", "--ranks", "0-99999999999")
    narrow, _ = _timeline(trial, tmp_path, "--steps", "2-7")
    assert wide["traceEvents"] == narrow["traceEvents"]
    assert wide["otherData"]["selection"] == {"ranks": [[0, 99999999999]],
                                              "steps": [[2, 99999999999]], "window_ms": None}
    assert narrow["otherData"]["selection"]["steps"] == [[2, 7]]

    for args in (["--window", "nan:5"], ["--window", "0:nan"], ["--window", "inf:"],
                 ["--window=-inf:5"], ["--window", ":1e999"], ["--window", "9:3"],
                 ["--steps", "1-" + "9" * 5000], ["--ranks", "nan"]):
        done, _ = _run("timeline", str(trial), "--output", "bad.json", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"aorta: error: aorta timeline: argument "
                               f"{args[0].split('=')[0]}: "), line
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "bad.json").exists()
