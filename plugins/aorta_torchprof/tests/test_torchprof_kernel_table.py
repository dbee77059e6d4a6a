"""``kernel_table`` on the real Kineto traces (fixtures/PROVENANCE.md), checked against the
traces' own events read with the json module."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from aorta_torchprof.parse import kernel_rows

FIXTURES = Path(__file__).parent / "fixtures"


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _steps(events: list[dict]) -> list[tuple[float, float, int]]:
    return [(e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
            if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]


def _step_of(steps, ts):
    return next((n for start, end, n in steps if start <= ts < end), None)


@pytest.mark.parametrize("trace", ["cuda_h200/torchprof/rank0.step5.pt.trace.json",
                                   "cuda_h200_bench/torchprof/rank0/rank0_step4.pt.trace.json.gz"])
def test_gpu_kernels_per_step_of_their_launch(trace):
    path = FIXTURES / trace
    events = _events(path)
    steps = _steps(events)
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    expected: dict = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("cat") == "kernel":
            ts = launch.get(e["args"].get("correlation"))
            key = (e["name"], None if ts is None else _step_of(steps, ts))
            expected[key][0] += 1
            expected[key][1] += e["dur"] / 1e3
    rows = kernel_rows(path.parent)
    assert {r.kind for r in rows} == {"gpu_kernel"}
    got = {(r.name, r.step): (r.calls, r.total_ms) for r in rows}
    assert got.keys() == expected.keys()
    for key, (calls, ms) in expected.items():
        assert got[key][0] == calls and got[key][1] == pytest.approx(ms), key
    assert {n for _, _, n in steps} <= {r.step for r in rows}


def test_cpu_ops_self_time_per_step():
    folder = FIXTURES / "cpu_single"
    events = _events(folder / "rank0.step5.pt.trace.json")
    steps = _steps(events)
    rows = kernel_rows(folder)
    assert {r.kind for r in rows} == {"cpu_op"}
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    calls = Counter((e["name"], _step_of(steps, e["ts"])) for e in ops)
    assert {(r.name, r.step): r.calls for r in rows} == dict(calls)
    # self time: never more than the ops' total time, and summed it is the threads' busy time
    total = defaultdict(float)
    for e in ops:
        total[(e["name"], _step_of(steps, e["ts"]))] += e["dur"] / 1e3
    for r in rows:
        assert 0 <= r.total_ms <= total[(r.name, r.step)] + 1e-9
    mm = [r for r in rows if r.name == "aten::mm"]
    assert mm and all(r.step in {2, 3, 4} for r in mm)
    # aten::linear only calls other ops: its self time is well below its total
    linear = sum(r.total_ms for r in rows if r.name == "aten::linear")
    assert linear < sum(v for (n, _), v in total.items() if n == "aten::linear")
