"""The overlap sweep against hand-worked cases (the brute-force check: *_fuzz.py)."""

from __future__ import annotations

import pytest

from aorta_core.benchmark.schema import Range
from aorta_core.benchmark.stream_overlap import comm_union_ms, compute_overlap

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
