"""Collectors' ``timeline_sources`` on the merged timeline: an in-tree collector, installed as a
real distribution, names a ``unix`` and a ``relative`` trace its workload wrote, and the core
places them by the clock declared; collectors whose hook raises, answers junk or hangs cost one
warning line each and their own lanes only. Real sweeps through the CLI; any machine (the
workload is a Python one-liner)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import run_aorta
from test_hook_isolation import ONLY_TEST_PLUGINS

#: ``lanes`` gives its folder to the workload; ``timeline_sources`` names what it finds there,
#: or misbehaves as ``behaviour`` says.
LANES = '''
import dataclasses
import time
from dataclasses import dataclass
from aorta_core import CollectorInfo, TimelineSource, hookimpl

@dataclass
class Options:
    behaviour: str = "good"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="names two traces", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    if options.behaviour != "good":
        return launch
    return dataclasses.replace(launch, env={**launch.env, "LANES_DIR": str(artifact_dir)})

@hookimpl
def timeline_sources(artifact_dir, options):
    if options.behaviour == "raise":
        raise RuntimeError("the trace index is gone")
    if options.behaviour == "hang":
        time.sleep(3600)
    if options.behaviour == "junk":
        return [TimelineSource(artifact_dir / "unix.json", clock="sundial")]
    return [TimelineSource(artifact_dir / "unix.json", clock="unix", rank=1, error_bound_ms=0.25),
            TimelineSource("relative.json", clock="relative", thread_name="queue {tid}")]
'''

#: Writes a trace on Unix time (µs since the epoch, no ``baseTimeNanoseconds``, the instant in
#: its args) and one of relative times (no pid, tid 3: two slices 500 µs apart), 0.3 s apart.
WORKLOAD = """
import json, os, time
folder = os.environ["LANES_DIR"]
time.sleep(0.1)
ns = time.time_ns()
unix = [{"ph": "M", "name": "process_name", "pid": 42, "tid": 0, "args": {"name": "probe"}},
        {"ph": "X", "name": "tick", "ts": ns // 1000, "dur": 100, "pid": 42, "tid": 1,
         "args": {"at_us": ns // 1000}}]
json.dump({"traceEvents": unix}, open(os.path.join(folder, "unix.json"), "w"))
time.sleep(0.3)
relative = [{"ph": "X", "name": "k0", "ts": 0, "dur": 10, "tid": 3},
            {"ph": "X", "name": "k1", "ts": 500, "dur": 20, "tid": 3}]
json.dump({"traceEvents": relative}, open(os.path.join(folder, "relative.json"), "w"))
"""


@pytest.fixture
def site(plugin_site):
    for name in ("lanes", "raiser", "junker", "hanger"):
        plugin_site.add(name, LANES)
    return plugin_site


def _sweep(site, tmp_path: Path, *overrides: str):
    out = tmp_path / "out"
    done = run_aorta([f"output={out}", "sweep=repeat", "trials=1", *overrides, "--",
                      sys.executable, "-c", WORKLOAD],
                     cwd=tmp_path, env={**site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    (trial,) = out.glob("cells/*/trial_000")
    return done, trial


def _names(doc: dict, kind: str) -> dict:
    return {(e["pid"], e["tid"]) if kind == "thread_name" else e["pid"]: e["args"]["name"]
            for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == kind}


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("aorta: warning: ")]


def test_unix_and_relative_sources_land_on_their_lanes_at_their_places(site, tmp_path):
    _, trial = _sweep(site, tmp_path, "collector=lanes")
    done = run_aorta(["timeline", str(trial)], cwd=tmp_path, env={**site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    assert _warnings(done.stderr) == []
    assert "lanes 3" in done.stderr  # the events per source, as `wrote` lists them
    doc = json.loads((trial / "timeline.json").read_text())
    record = json.loads((trial / "record.json").read_text())
    origin = doc["otherData"]["origin_unix_ns"]
    assert origin == int(record["started_at_unix"] * 1e9)
    sources = {s["file"]: s for s in doc["otherData"]["sources"]}
    assert set(sources) == {"lanes/unix.json", "lanes/relative.json"}
    assert {s["kind"] for s in sources.values()} == {"lanes"}

    # unix: at its own instant, on rank 1 as the collector states, with the bound it states
    unix = sources["lanes/unix.json"]
    assert (unix["rank"], unix["events"], unix["alignment"], unix["error_bound_ms"]) == \
        (1, 1, "unix", 0.25)
    processes, threads = _names(doc, "process_name"), _names(doc, "thread_name")
    (tick,) = [e for e in doc["traceEvents"] if e.get("name") == "tick"]
    assert processes[tick["pid"]] == "rank 1 · lanes probe (pid 42)"
    assert tick["ts"] == pytest.approx(tick["args"]["at_us"] - origin / 1000, abs=1)
    assert 100_000 <= tick["ts"] <= record["wall_time_s"] * 1e6

    # relative: centred in the run (its start to the file's mtime), half the slack its bound
    relative = sources["lanes/relative.json"]
    low = origin
    high = min(low + int(record["wall_time_s"] * 1e9),
               (trial / "lanes/relative.json").stat().st_mtime_ns)
    slack = high - low - 520_000  # first slice's start to the last one's end
    assert (relative["rank"], relative["events"], relative["alignment"]) == (0, 2, "run_window")
    assert relative["first_event_unix_ns"] == low + slack // 2
    assert relative["error_bound_ms"] == pytest.approx(slack / 2e6, abs=1e-6)
    k0, k1 = sorted((e for e in doc["traceEvents"] if e.get("name") in ("k0", "k1")),
                    key=lambda e: e["name"])
    assert k0["ts"] == pytest.approx((low + slack // 2 - origin) / 1000, abs=1e-3)
    assert k1["ts"] - k0["ts"] == pytest.approx(500)
    assert k0["pid"] == k1["pid"] != tick["pid"]
    assert processes[k0["pid"]] == "rank 0 · lanes relative.json"
    assert threads[(k0["pid"], k0["tid"])] == "queue 3"


def test_a_failing_collector_costs_one_line_and_its_own_lanes(site, tmp_path):
    """Raising, answering junk and hanging past hook_timeout, in the sweep's own timeline
    step; then ``aorta timeline`` on the same trial with one of them uninstalled."""
    done, trial = _sweep(site, tmp_path, "collector=[lanes,raiser,junker,hanger]",
                         "collector.raiser.behaviour=raise", "collector.junker.behaviour=junk",
                         "collector.hanger.behaviour=hang", "hook_timeout=2", "timeline=true")
    assert _warnings(done.stderr) == [
        "aorta: warning: hanger: timeline_sources failed: did not return within 2 s "
        "(hook_timeout); its traces are left out of the timeline",
        "aorta: warning: junker: timeline_sources returned clock 'sundial' for "
        f"{trial}/junker/unix.json; use one of unix, relative; its traces are left out of "
        "the timeline",
        "aorta: warning: raiser: timeline_sources failed: RuntimeError: the trace index is "
        "gone; its traces are left out of the timeline",
    ]
    assert "Traceback" not in done.stderr
    doc = json.loads((trial / "timeline.json").read_text())
    assert sorted(s["file"] for s in doc["otherData"]["sources"]) == \
        ["lanes/relative.json", "lanes/unix.json"]
    assert sum(e.get("name") in ("tick", "k0", "k1") for e in doc["traceEvents"]) == 3

    # a Kineto trace in a collector's folder is that collector's to name, even where it is not
    # installed; one in a folder of nobody's is read as a Kineto trace of its own
    start_us = int(json.loads((trial / "record.json").read_text())["started_at_unix"] * 1e6)
    for folder in ("junker", "hanger", "mine"):
        (trial / folder).mkdir(exist_ok=True)
        (trial / folder / "kineto.json").write_text(json.dumps({
            "schemaVersion": 1, "traceEvents": [{"ph": "X", "name": f"{folder} op", "pid": 1,
                                                 "tid": 1, "ts": start_us + 10, "dur": 5}]}))
    cli = run_aorta(["timeline", str(trial)], cwd=tmp_path,
                    env={**site.env, "AORTA_DISABLE_PLUGINS":
                         f"{ONLY_TEST_PLUGINS['AORTA_DISABLE_PLUGINS']},hanger,junker"})
    assert cli.returncode == 0, cli.stderr
    assert _warnings(cli.stderr) == [
        "aorta: warning: hanger: not installed here (see `aorta plugins`), so its traces are "
        "left out of the timeline",
        "aorta: warning: junker: not installed here (see `aorta plugins`), so its traces are "
        "left out of the timeline",
        "aorta: warning: raiser: timeline_sources failed: RuntimeError: the trace index is "
        "gone; its traces are left out of the timeline",
    ]
    again = json.loads((trial / "timeline.json").read_text())
    (mine,) = [s for s in again["otherData"]["sources"] if s not in doc["otherData"]["sources"]]
    assert (mine["file"], mine["kind"]) == ("mine/kineto.json", "kineto")
    assert len(again["otherData"]["sources"]) == len(doc["otherData"]["sources"]) + 1
    assert [e["name"] for e in again["traceEvents"] if e["name"].endswith(" op")] == ["mine op"]

    # a collector that ran but no longer imports is named with its error; one installed since,
    # broken too, did not run in this trial and is never imported; the hanging one is given up
    # after --hook-timeout
    (site.root / "aorta_test_raiser" / "plugin.py").write_text(
        "raise RuntimeError('broken at import')\n")
    site.add("other", "raise RuntimeError('never imported')\n")
    broken = run_aorta(["timeline", str(trial), "--hook-timeout", "2"], cwd=tmp_path,
                       env={**site.env, **ONLY_TEST_PLUGINS}, timeout=60)
    assert broken.returncode == 0, broken.stderr
    assert "aorta: warning: hanger: timeline_sources failed: did not return within 2 s " \
        "(hook_timeout); its traces are left out of the timeline" in _warnings(broken.stderr)
    (raiser,) = [w for w in _warnings(broken.stderr) if w.startswith("aorta: warning: raiser:")]
    assert raiser.startswith("aorta: warning: raiser: unusable here (") and \
        "broken at import" in raiser and raiser.endswith("its traces are left out of the timeline")
    assert "never imported" not in broken.stderr
    assert sorted(s["file"] for s in json.loads(
        (trial / "timeline.json").read_text())["otherData"]["sources"]) == \
        ["lanes/relative.json", "lanes/unix.json", "mine/kineto.json"]


@pytest.mark.parametrize(("marks", "said"), [
    ([("k", 5, 1)], "mark ('k', 5, 1) for t.json; use (event name, not before, not after) "
                    "tuples of Unix ns (not before <= not after)"),
    ([("k", 1.5, 2)], "mark ('k', 1.5, 2) for t.json; use (event name, not before, not after) "
                      "tuples of Unix ns (not before <= not after)"),
    ("k", "marks 'k' for t.json; use (event name, not before, not after) tuples of Unix ns"),
])
def test_clock_marks_that_place_nothing_are_named(tmp_path, marks, said):
    """A collector's ``TimelineSource.marks`` are checked like its other fields: the first
    thing wrong, in one line."""
    from aorta_core import TimelineSource
    from aorta_core.reports.timeline_inputs import checked

    with pytest.raises(ValueError) as caught:
        checked([TimelineSource("t.json", clock="relative", marks=marks)], tmp_path, tmp_path)
    assert str(caught.value) == said


def test_clock_marks_are_for_a_relative_trace(tmp_path):
    from aorta_core import TimelineSource
    from aorta_core.reports.timeline_inputs import checked

    with pytest.raises(ValueError, match=r"marks for t\.json, whose clock is 'unix'; marks place"):
        checked([TimelineSource("t.json", clock="unix", marks=[("k", 1, 2)])], tmp_path, tmp_path)
    (source,) = checked([TimelineSource("t.json", clock="relative", marks=[["k", 1, 2]])],
                        tmp_path, tmp_path)
    assert source.marks == (("k", 1, 2),)
