"""Per-iteration overlap of the benchmark's streams, from their timed ranges (CUDA events only).

A sweep over the range boundaries: between two consecutive boundaries the set of active
streams (and collective kinds) is constant, so every interval is attributed exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from aorta_core.api.intervals import union_length
from aorta_core.benchmark.schema import Overlap, OverlapMs, Range, Segment

STREAMS = ("compute", "allreduce", "reducescatter", "aux")
COMM_KINDS = ("allreduce", "reducescatter", "allgather")


def compute_overlap(ranges: Iterable[Range], total_ms: float) -> Overlap:
    """Per-stream busy time, compute/communication overlap, idle time and active segments.

    Communication is identified by the range's ``kind`` (all-gathers run on the aux stream
    next to data and optimizer work). ``idle`` is the part of ``[0, total_ms]`` where no stream
    is busy.
    """
    edges: list[tuple[float, int, str, str]] = []
    for r in ranges:
        if r.end_ms > r.start_ms:
            stream = r.stream if isinstance(r.stream, str) else r.kind
            edges.append((r.start_ms, 0, stream, r.kind))
            edges.append((r.end_ms, 1, stream, r.kind))
    edges.sort(key=lambda e: (e[0], e[1]))
    streams: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    busy = dict.fromkeys(STREAMS, 0.0)
    ov = dict.fromkeys(("compute_allreduce", "compute_reducescatter", "compute_allgather",
                        "compute_comm"), 0.0)
    union = 0.0
    segments: list[Segment] = []
    prev = None
    for time_ms, is_end, stream, kind in edges:
        if prev is not None and time_ms > prev:
            active = sorted(s for s, n in streams.items() if n > 0)
            if active:
                dt = time_ms - prev
                union += dt
                for s in active:
                    busy[s] = busy.get(s, 0.0) + dt
                if streams["compute"] > 0:
                    comm = [k for k in COMM_KINDS if kinds[k] > 0]
                    for k in comm:
                        ov[f"compute_{k}"] += dt
                    if comm:
                        ov["compute_comm"] += dt
                segments.append(Segment(start_ms=prev, end_ms=time_ms, active_streams=active))
        (streams[stream], kinds[kind]) = (
            (streams[stream] - 1, kinds[kind] - 1) if is_end
            else (streams[stream] + 1, kinds[kind] + 1)
        )
        prev = time_ms
    idle = max(0.0, total_ms - union)
    util = {s: (v / total_ms if total_ms > 0 else 0.0) for s, v in busy.items()}
    return Overlap(
        per_stream_ms=busy,
        overlap_ms=OverlapMs(idle=idle, **ov),
        active_segments=segments,
        utilization=util,
    )


def comm_union_ms(ranges: Iterable[Range]) -> float:
    """Length of the union of all communication intervals (HTA's denominator)."""
    comm = [r for r in ranges if r.kind in COMM_KINDS]
    return union_length([r.start_ms for r in comm], [r.end_ms for r in comm])
