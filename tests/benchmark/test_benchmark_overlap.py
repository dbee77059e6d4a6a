"""The overlap sweep against hand-worked cases and a brute-force discretisation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_core.benchmark.overlap import comm_union_ms, compute_overlap
from aorta_core.benchmark.schema import Range

KIND_STREAM = {"forward": "compute", "backward": "compute", "allreduce": "allreduce",
               "reducescatter": "reducescatter", "allgather": "aux", "optimizer": "aux"}


def rng(kind: str, start: float, end: float) -> Range:
    return Range(kind=kind, tag=kind, start_ms=start, end_ms=end, duration_ms=end - start,
                 stream=KIND_STREAM[kind])


def test_hand_worked_iteration():
    # compute 0-10, all-reduce 5-12, reduce-scatter 8-9, all-gather 1-2, optimizer 13-15; total 20
    ranges = [rng("forward", 0, 4), rng("backward", 4, 10), rng("allreduce", 5, 12),
              rng("reducescatter", 8, 9), rng("allgather", 1, 2), rng("optimizer", 13, 15)]
    ov = compute_overlap(ranges, 20.0)
    assert ov.per_stream_ms == {"compute": 10.0, "allreduce": 7.0, "reducescatter": 1.0,
                                "aux": 3.0}
    assert ov.overlap_ms.compute_allreduce == 5.0
    assert ov.overlap_ms.compute_reducescatter == 1.0
    assert ov.overlap_ms.compute_allgather == 1.0
    assert ov.overlap_ms.compute_comm == 6.0  # 1-2 and 5-10
    assert ov.overlap_ms.idle == 20.0 - 14.0  # busy 0-12 and 13-15
    assert ov.utilization["compute"] == pytest.approx(0.5)
    assert ov.active_segments[0].active_streams == ["compute"]
    assert comm_union_ms(ranges) == 8.0  # 1-2, 5-12


def test_empty_iteration_is_all_idle():
    ov = compute_overlap([], 3.0)
    assert ov.overlap_ms.idle == 3.0 and ov.active_segments == []


def brute(ranges: list[Range], total: float, step: float = 0.5) -> dict[str, float]:
    out = {"compute_comm": 0.0, "idle": 0.0, "compute": 0.0}
    t = 0.0
    while t < total:
        mid = t + step / 2
        active = [r for r in ranges if r.start_ms <= mid < r.end_ms]
        kinds = {r.kind for r in active}
        compute = bool(kinds & {"forward", "backward"})
        comm = bool(kinds & {"allreduce", "reducescatter", "allgather"})
        out["compute"] += step if compute else 0.0
        out["compute_comm"] += step if compute and comm else 0.0
        out["idle"] += step if not active else 0.0
        t += step
    return out


halves = st.integers(min_value=0, max_value=40).map(lambda v: v / 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(KIND_STREAM)), halves, halves), max_size=8))
def test_sweep_matches_brute_force(spans):
    ranges = [rng(kind, min(a, b), max(a, b)) for kind, a, b in spans]
    ov = compute_overlap(ranges, 20.0)
    expected = brute(ranges, 20.0)
    assert ov.overlap_ms.compute_comm == pytest.approx(expected["compute_comm"])
    assert ov.overlap_ms.idle == pytest.approx(expected["idle"])
    assert ov.per_stream_ms["compute"] == pytest.approx(expected["compute"])
