"""``sweep=agree`` that respects time, run for real on this CPU: a collector whose times are not
comparable runs one round while the others run every one; the plan prints an estimate before
the rounds and a measured one after the first; a reference that disagrees with every profiler
gets its reason (the GPU's busy share of the reference span) in agreement.json and report.html.

Two collectors are installed as real distributions: ``kern`` (times comparable) and ``replay``
(``times_comparable=False``, as ncu declares). Each points the payload at its artifact folder;
the payload writes there the time of its busy part (its "kernels") and to $AORTA_METRICS_PATH
its whole span (the reference), which also holds a sleep, so the two disagree.
"""

from __future__ import annotations

import json
import re
import statistics
import sys

from cli_helpers import records
from reports.report_helpers import aorta

from aorta_core.reports.agreement import BUSY_FORMULA

REFERENCE = "workload_gpu_time_ms"
COLLECTOR = '''
import dataclasses, json, os
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="stand-in", options=Options,
                         config_package=__package__ + ".conf", times_comparable={comparable})

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    out = str(artifact_dir / "busy.json")
    return dataclasses.replace(launch, argv=("env", f"BUSY_OUT={{out}}", *launch.argv))

@hookimpl
def parse_metrics(artifact_dir, options):
    busy = json.loads((artifact_dir / "busy.json").read_text())["busy_ms"]
    return {{"{name}_gpu_time_ms": busy}}
'''
PAYLOAD = """\
import json, os, time
start = time.perf_counter()
sum(i * i for i in range(200_000))
busy = (time.perf_counter() - start) * 1e3
time.sleep(0.08)
span = (time.perf_counter() - start) * 1e3
if os.environ.get("BUSY_OUT"):
    json.dump({"busy_ms": busy}, open(os.environ["BUSY_OUT"], "w"))
json.dump({"gpu_time_ms": span}, open(os.environ["AORTA_METRICS_PATH"], "w"))
"""
NUMBER = r"[\d.]+"


def _by_cell(output) -> dict[str, list[dict]]:
    cells: dict[str, list[dict]] = {}
    for record in records(output):
        cells.setdefault(record["cell"], []).append(record)
    return cells


def _sweep(plugin_site, tmp_path, out, trials: int, *extra: str):
    script = tmp_path / "payload.py"
    script.write_text(PAYLOAD)
    done = aorta("sweep=agree", f"trials={trials}", "agree.collectors=[kern,replay]",
                 f"output={out}", *extra, "--", sys.executable, str(script), cwd=tmp_path,
                 env={**plugin_site.env, "COLUMNS": "600"})  # the verdicts unwrapped
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_incomparable_collector_runs_one_round_with_estimates_and_reason(plugin_site, tmp_path):
    plugin_site.add("kern", COLLECTOR.format(name="kern", comparable=True))
    plugin_site.add("replay", COLLECTOR.format(name="replay", comparable=False))
    out = tmp_path / "agree"
    err = _sweep(plugin_site, tmp_path, out, 3)
    # The plan: cells × rounds, and no wall time recorded yet, so the estimate follows round 1.
    assert "agree 3 cells × up to 3 rounds, interleaved: 7 trials to run (bare 3, kern 3, " \
           "replay 1)" in err
    assert "no wall time recorded yet for bare, kern, replay; the estimate follows the first " \
           "round" in err
    cells = _by_cell(out)
    assert {n: len(r) for n, r in cells.items()} == {"bare": 3, "kern": 3, "replay": 1}
    round1 = {n: next(r for r in rs if r["trial"] == 0)["wall_time_s"] for n, rs in cells.items()}
    measured = re.search(rf"round 1 took ({NUMBER}) s; measured estimate for the rest: "
                         rf"~({NUMBER}) s for 4 trials \(bare 2×{NUMBER} s, kern 2×{NUMBER} s\)",
                         err)
    assert measured, err
    assert float(measured[1]) == float(f"{sum(round1.values()):.3g}")
    assert float(measured[2]) == float(f"{2 * (round1['bare'] + round1['kern']):.3g}")

    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement["collectors"]["replay"]["rounds"] == 1
    assert agreement["collectors"]["replay"]["trials"]["total"] == 1
    assert agreement["collectors"]["kern"]["rounds"] == 3
    matrix = json.loads((out / "matrix.json").read_text())
    assert {c["cell"]: c["agree"]["rounds"] for c in matrix["cells"]} == {
        "bare": 3, "kern": 3, "replay": 1}
    gpu = agreement["metrics"]["gpu_time_ms"]
    assert gpu["sources"]["replay"]["status"] == "not comparable"
    reason = gpu["reference_reason"]
    shares = [r["metrics"]["kern_gpu_time_ms"] / r["metrics"][REFERENCE] for r in cells["kern"]]
    busy = statistics.median(shares)
    assert busy < 0.9  # the sleep is in the span, not in the "kernels"
    assert reason["busy_share"] == busy and reason["formula"] == BUSY_FORMULA
    assert reason["collectors"]["kern"]["n"] == 3
    assert list(reason["collectors"]) == ["kern"]  # replay's times are not compared
    said = f"the GPU was busy {busy * 100:.0f} % of the reference span (idle " \
           f"{(1 - busy) * 100:.0f} %)"
    assert reason["text"].startswith(said)
    assert gpu["sources"]["reference"]["status"] == "disagree"
    assert gpu["sources"]["reference"]["verdict"].endswith(f"; why: {reason['text']}")
    assert gpu["verdict"].endswith(f"; the reference: {reason['text']}")
    assert said in err  # the console's agreement table
    page = (out / "report.html").read_text()
    assert "Why the reference disagrees with every profiler: " in page and said in page
    assert "busy share = &lt;collector&gt;_gpu_time_ms" in page
    perf = (out / "perf.md").read_text()  # the verdicts and the reason, in perf.md too
    assert "## Agreement (sweep=agree)" in perf
    assert f"Why the reference disagrees on gpu_time_ms: {reason['text']}." in perf
    overall = re.search(r"^\| gpu_time_ms +\| \(all\) +\|[^|]+\|[^|]+\| (.+?) +\|$", perf, re.M)
    assert overall and overall[1] == gpu["verdict"].replace(">", "&gt;"), perf

    # Resumed with more rounds: the walls recorded in this output give the estimate up front.
    again = _sweep(plugin_site, tmp_path, out, 4)
    walls = {n: statistics.median(r["wall_time_s"] for r in rs) for n, rs in cells.items()}
    assert "2 trials to run (bare 1, kern 1, replay 0)" in again
    plan = re.search(rf"estimate: ~({NUMBER}) s for 2 trials \(bare ({NUMBER}) s a trial "
                     rf"recorded in this output; slowdown kern ({NUMBER})x\)", again)
    assert plan, again
    assert float(plan[1]) == float(f"{walls['bare'] + walls['kern']:.3g}")
    assert float(plan[3]) == float(f"{walls['kern'] / walls['bare']:.3g}")
    assert {n: len(r) for n, r in _by_cell(out).items()} == {"bare": 4, "kern": 4, "replay": 1}


def test_rounds_for_incomparable_asked_for(plugin_site, tmp_path):
    plugin_site.add("kern", COLLECTOR.format(name="kern", comparable=True))
    plugin_site.add("replay", COLLECTOR.format(name="replay", comparable=False))
    out = tmp_path / "all"
    _sweep(plugin_site, tmp_path, out, 2, "agree.rounds_for_incomparable=null")
    assert {n: len(r) for n, r in _by_cell(out).items()} == {"bare": 2, "kern": 2, "replay": 2}
    bad = aorta("sweep=agree", "trials=2", "agree.collectors=[kern]", f"output={tmp_path / 'b'}",
                "agree.rounds_for_incomparable=0", "--", sys.executable, "-c", "pass",
                cwd=tmp_path, env=plugin_site.env, check=False)
    assert bad.returncode != 0
    assert "agree.rounds_for_incomparable=0 is not a whole number >= 1" in bad.stderr
