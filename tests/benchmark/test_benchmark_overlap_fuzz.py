"""The overlap sweep against a brute-force discretisation of random ranges (hypothesis)."""

from __future__ import annotations

import pytest
from needs import need

from aorta_core.benchmark.schema import Range
from aorta_core.benchmark.stream_overlap import compute_overlap

hypothesis = need("hypothesis")
st = hypothesis.strategies
KIND_STREAM = {"forward": "compute", "backward": "compute", "allreduce": "allreduce",
               "reducescatter": "reducescatter", "allgather": "aux", "optimizer": "aux"}


def rng(kind: str, start: float, end: float) -> Range:
    return Range(kind=kind, tag=kind, start_ms=start, end_ms=end, duration_ms=end - start,
                 stream=KIND_STREAM[kind])


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


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.lists(st.tuples(st.sampled_from(sorted(KIND_STREAM)), halves, halves),
                           max_size=8))
def test_sweep_matches_brute_force(spans):
    ranges = [rng(kind, min(a, b), max(a, b)) for kind, a, b in spans]
    ov = compute_overlap(ranges, 20.0)
    expected = brute(ranges, 20.0)
    assert ov.overlap_ms.compute_comm == pytest.approx(expected["compute_comm"])
    assert ov.overlap_ms.idle == pytest.approx(expected["idle"])
    assert ov.per_stream_ms["compute"] == pytest.approx(expected["compute"])
