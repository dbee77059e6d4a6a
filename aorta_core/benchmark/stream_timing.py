"""Timing of one iteration: CUDA events on dedicated streams, or wall clock on CPU.

``CudaTimeline`` runs each phase on its own stream (compute, allreduce, reducescatter, aux) and
times it with ``torch.cuda.Event(enable_timing=True)``; ``WallTimeline`` has no streams and
records host wall-clock per phase and per collective (end = the Work's future completing);
``NullTimeline`` (telemetry off) only synchronises so the step time stays honest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from aorta_core.benchmark.schema import Range
from aorta_core.benchmark.stream_overlap import STREAMS

#: Dedicated stream of each collective kind (all-gathers share aux, as upstream does).
STREAM_OF = {"allreduce": "allreduce", "reducescatter": "reducescatter", "allgather": "aux"}

Metadata = Mapping[str, str | int | float]


@dataclass
class IterationTiming:
    clock: str  # cuda_event | wall | none
    total_ms: float
    ranges: list[Range]
    #: Collectives whose completion was not observed before the iteration ended.
    unfinished: int = 0


class NullTimeline:
    """Telemetry off: no streams, no events, no ranges; synchronise at the end of a step."""

    clock = "none"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def begin(self) -> None:
        """Nothing to record."""

    @contextmanager
    def range(self, stream: str, kind: str, tag: str, metadata: Metadata | None = None
              ) -> Iterator[None]:
        yield

    def handoff(self, src: str, dst: str, tensors: Sequence[torch.Tensor] = ()) -> None:
        """Everything runs on the current stream: nothing to order."""

    def end(self) -> IterationTiming:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return IterationTiming("none", 0.0, [])


class WallTimeline:
    """CPU: host wall-clock per phase; collectives end when their future completes."""

    clock = "wall"

    def __init__(self) -> None:
        self._t0 = 0
        self._ranges: list[list[Any]] = []

    def begin(self) -> None:
        self._ranges = []
        self._t0 = time.perf_counter_ns()

    @contextmanager
    def range(self, stream: str, kind: str, tag: str, metadata: Metadata | None = None
              ) -> Iterator[None]:
        start = time.perf_counter_ns()
        yield
        self._ranges.append([kind, tag, start, time.perf_counter_ns(), metadata])

    def handoff(self, src: str, dst: str, tensors: Sequence[torch.Tensor] = ()) -> None:
        """One host thread: program order is the only order."""

    def collective(self, kind: str, tag: str, metadata: Metadata, call: Callable[[], Any]
                   ) -> tuple[Any, None]:
        entry: list[Any] = [kind, tag, time.perf_counter_ns(), None, metadata]
        self._ranges.append(entry)
        work = call()
        if work is None:
            entry[3] = time.perf_counter_ns()
            return None, None
        try:
            work.get_future().then(lambda _f: entry.__setitem__(3, time.perf_counter_ns()))
        except RuntimeError:  # gloo's reduce-scatter Work has no future
            return _WaitTimedWork(work, entry), None
        return work, None

    def end(self) -> IterationTiming:
        t_end = time.perf_counter_ns()
        ranges, unfinished = [], 0
        for kind, tag, start, stop, metadata in self._ranges:
            if stop is None:
                unfinished += 1
                continue
            ranges.append(_range(kind, tag, (start - self._t0) / 1e6, (stop - self._t0) / 1e6,
                                 None, metadata))
        ranges.sort(key=lambda r: r.start_ms)
        return IterationTiming("wall", (t_end - self._t0) / 1e6, ranges, unfinished)


class _WaitTimedWork(dist.Work):
    """A Work whose completion time is taken when ``wait()`` returns (no future to hook)."""

    def __init__(self, inner: dist.Work, entry: list[Any]) -> None:
        super().__init__()
        self._inner, self._entry = inner, entry

    def wait(self, timeout: Any = None) -> bool:
        done = self._inner.wait() if timeout is None else self._inner.wait(timeout)
        if self._entry[3] is None:
            self._entry[3] = time.perf_counter_ns()
        return done

    def is_completed(self) -> bool:
        return self._inner.is_completed()

    def is_success(self) -> bool:
        return self._inner.is_success()

    def exception(self) -> Any:
        return self._inner.exception()

    def source_rank(self) -> int:
        return self._inner.source_rank()

    def result(self) -> Any:
        return self._inner.result()

    def synchronize(self) -> None:
        self._inner.synchronize()


class CudaTimeline:
    """CUDA/ROCm: phases and collectives on dedicated streams, timed with CUDA events."""

    clock = "cuda_event"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.streams = {name: torch.cuda.Stream(device=device) for name in STREAMS}
        self._start: torch.cuda.Event | None = None
        self._events: list[tuple[str, str, str, Any, Any, Metadata | None]] = []

    def _event(self) -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=True)

    def begin(self) -> None:
        self._events = []
        self._start = self._event()
        self._start.record(torch.cuda.current_stream(self.device))
        for stream in self.streams.values():
            stream.wait_event(self._start)

    @contextmanager
    def range(self, stream: str, kind: str, tag: str, metadata: Metadata | None = None
              ) -> Iterator[None]:
        s = self.streams[stream]
        with torch.cuda.stream(s):
            start = self._event()
            start.record(s)
            yield
            end = self._event()
            end.record(s)
        self._events.append((stream, kind, tag, start, end, metadata))

    def handoff(self, src: str, dst: str, tensors: Sequence[torch.Tensor] = ()) -> None:
        """Order ``dst`` after ``src``; tensors made on ``src`` are also used on ``dst``."""
        target = self.streams[dst]
        target.wait_stream(self.streams[src])
        target.wait_stream(torch.cuda.current_stream(self.device))
        for tensor in tensors:
            tensor.record_stream(target)

    def collective(self, kind: str, tag: str, metadata: Metadata, call: Callable[[], Any]
                   ) -> tuple[Any, torch.cuda.Stream]:
        """Launch ``call`` (an async collective) from its dedicated stream and time it.

        The stream first waits for the caller's stream (inputs ready), then for the
        collective's Work, so its end event marks the collective's completion on the device.
        """
        stream_name = STREAM_OF[kind]
        s = self.streams[stream_name]
        s.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(s):
            start = self._event()
            start.record(s)
            work = call()
            if work is not None:
                work.wait()
            end = self._event()
            end.record(s)
        self._events.append((stream_name, kind, tag, start, end, metadata))
        return work, s

    def end(self) -> IterationTiming:
        main = torch.cuda.current_stream(self.device)
        for stream in self.streams.values():
            main.wait_stream(stream)
        stop = self._event()
        stop.record(main)
        stop.synchronize()
        start = self._start
        ranges = [
            _range(kind, tag, start.elapsed_time(e0), start.elapsed_time(e1), stream, metadata)
            for stream, kind, tag, e0, e1, metadata in self._events
        ]
        return IterationTiming("cuda_event", start.elapsed_time(stop), ranges)


def _range(kind: str, tag: str, start_ms: float, end_ms: float, stream: str | None,
           metadata: Metadata | None) -> Range:
    extra: dict[str, Any] = {"metadata": dict(metadata)} if metadata else {}
    if stream is not None:
        extra["stream"] = stream
    return Range(kind=kind, tag=tag, start_ms=start_ms, end_ms=end_ms,
                 duration_ms=end_ms - start_ms, **extra)


def make_timeline(device: torch.device, enabled: bool
                  ) -> NullTimeline | WallTimeline | CudaTimeline:
    if not enabled:
        return NullTimeline(device)
    if device.type == "cuda":
        return CudaTimeline(device)
    return WallTimeline()
