"""The parser on real CUDA traces captured on an NVIDIA H200 (fixtures/PROVENANCE.md).

Each fixture folder holds the trial's ``record.json`` next to its ``torchprof/`` artifact folder,
so the expected numbers come twice from outside the parser: recomputed here from the trace JSON
with a few lines of plain Python, and as recorded by the sweep on the H200 itself.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aorta_torchprof.parse import parse_dir

FIXTURES = Path(__file__).parent / "fixtures"
# (fixture folder, its single trace, its kernel count: a pin on what was captured)
CUDA = [
    ("cuda_h200", "torchprof/rank0.step5.pt.trace.json", 57),
    ("cuda_h200_bench", "torchprof/rank0/rank0_step4.pt.trace.json.gz", 2124),
]
REL = 1e-9  # float sums: polars may add in another order than on the H200; ts rounding
#: Metrics from differences of timestamps: a float ts near 5e12 µs holds about 1 ns.
FROM_TIMESTAMPS = {"torchprof_step_time_ms": 1e-6}


def _trace(path: Path) -> dict[str, Any]:
    """The trace with exact decimal times: ``ts`` (~5e12 µs) has ns digits a float would round."""
    data = path.read_bytes()
    return json.loads(
        gzip.decompress(data) if path.name.endswith(".gz") else data, parse_float=Decimal
    )


def _complete(events: list[dict[str, Any]], cat: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("cat") == cat and e.get("ph") == "X"]


def _union_us(intervals: list[tuple[Decimal, Decimal]]) -> Decimal:
    total = Decimal(0)
    end = min(start for start, _ in intervals)
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _ms(us: Decimal | int) -> float:
    return float(Decimal(us) / 1000)


def _step_time_ms(events: list[dict[str, Any]], kernels: list[dict[str, Any]]) -> float:
    """The GPU's time per profiled step: each kernel's step is the CPU ``ProfilerStep#N``
    holding its launch (the runtime event of its correlation id); from the first such kernel's
    start to the last one's end, over the steps."""
    steps = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in _complete(events, "user_annotation")
             if e["name"].startswith("ProfilerStep#")]
    launches = {e["args"]["correlation"]: e["ts"] for e in _complete(events, "cuda_runtime")
                if "correlation" in e.get("args", {})}
    stepped, seen = [], set()
    for k in kernels:
        launch = launches.get(k["args"].get("correlation"))
        step = next((n for a, b, n in steps if launch is not None and a <= launch < b), None)
        if step is not None:
            stepped.append(k)
            seen.add(step)
    span = max(k["ts"] + k["dur"] for k in stepped) - min(k["ts"] for k in stepped)
    return _ms(span / len(seen))


def _expected(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The GPU metrics computed directly from the trace events."""
    kernels = _complete(events, "kernel")
    per_name: dict[str, Decimal] = defaultdict(Decimal)
    for e in kernels:
        per_name[e["name"]] += e["dur"]
    ranked = sorted(per_name.items(), key=lambda item: (-item[1], item[0]))
    return {
        "torchprof_kernel_count": len(kernels),
        "torchprof_gpu_time_ms": _ms(sum(e["dur"] for e in kernels)),
        "torchprof_top_kernel_ms": _ms(ranked[0][1]),
        "torchprof_top_kernels": [name for name, _ in ranked[:5]],
        "torchprof_memcpy_ms": _ms(sum(e["dur"] for e in _complete(events, "gpu_memcpy"))),
        "torchprof_memset_ms": _ms(sum(e["dur"] for e in _complete(events, "gpu_memset"))),
        # No NCCL kernel in these traces, so every kernel counts as computation.
        "torchprof_compute_ms": _ms(_union_us([(e["ts"], e["ts"] + e["dur"]) for e in kernels])),
        "torchprof_step_time_ms": _step_time_ms(events, kernels),
    }


def _same(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if isinstance(value, float):
            assert actual[key] == pytest.approx(value, rel=REL,
                                                abs=FROM_TIMESTAMPS.get(key, 1e-12)), key
        else:
            assert actual[key] == value, key


@pytest.mark.parametrize(("folder", "trace", "kernels"), CUDA)
def test_cuda_metrics_match_the_trace(folder: str, trace: str, kernels: int) -> None:
    events = _trace(FIXTURES / folder / trace)["traceEvents"]
    assert not [e for e in _complete(events, "kernel") if "nccl" in e["name"].lower()]
    expected = _expected(events)
    assert expected["torchprof_kernel_count"] == kernels
    metrics = parse_dir(FIXTURES / folder / "torchprof")
    assert metrics["torchprof_trace_count"] == metrics["torchprof_rank_count"] == 1
    _same(metrics, expected)
    # Without communication the overlap metrics are absent, not zero; no CPU fallback either.
    assert not {k for k in metrics if "comm" in k or "overlap" in k or "cpu_op" in k}


@pytest.mark.parametrize(("folder", "trace", "kernels"), CUDA)
def test_cuda_metrics_equal_those_recorded_on_the_h200(
    folder: str, trace: str, kernels: int
) -> None:
    record = json.loads((FIXTURES / folder / "record.json").read_text())
    assert record["verdict"] == "pass"
    assert record["environment"]["gpus"][0]["name"] == "NVIDIA H200"
    recorded = {
        key: value
        for key, value in record["metrics"].items()
        if key.startswith("torchprof_") and key != "torchprof_artifact_dir"
    }
    assert recorded["torchprof_kernel_count"] == kernels
    metrics = parse_dir(FIXTURES / folder / "torchprof")
    # torchprof_step_time_ms came after these captures (checked against the trace above)
    assert metrics.keys() == recorded.keys() | {"torchprof_step_time_ms"}
    _same(metrics, recorded)
