"""Fault injection on one rank (``inject.*``, :class:`~aorta_core.benchmark.config.InjectConfig`).

Each kind adds a known cost to every step of the slowed rank, where ``aorta diagnose`` should
find it: host time outside any op (a sleep, or a busy Python loop), time in the data step,
matmuls after the forward, a sleep before the step's first all_reduce/reduce_scatter. What was
injected, as measured on the host, goes into the rank's JSONL (``injected_ms``): the truth on
disk that the diagnosis is checked against.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from aorta_core.benchmark.collectives import replaced
from aorta_core.benchmark.config import InjectConfig

#: The collectives a delayed collective waits before (whichever this torch has).
DELAYED = ("all_reduce", "reduce_scatter_tensor", "reduce_scatter_single", "reduce_scatter")
#: Side of the square matrices of the compute injection.
MATMUL_N = {"cpu": 256, "cuda": 2048}
_CALIBRATION_MATMULS = 20


def _sleep_ms(ms: float) -> None:
    end = time.perf_counter_ns() + int(ms * 1e6)
    time.sleep(ms / 1e3)
    while time.perf_counter_ns() < end:  # sleep may wake early
        pass


def _burn_ms(ms: float) -> None:
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


class Injector:
    """The injections of this rank; every method is a no-op on the ranks that are not slowed."""

    def __init__(self, cfg: InjectConfig, rank: int, device: torch.device) -> None:
        self.cfg = cfg
        self.on = cfg.active() and rank == cfg.rank
        self.device = device
        self.done: dict[str, float] = {}
        self._pending_collective = False
        self._matmul_ms: float | None = None  # GPU: one matmul's time, from the calibration

    def begin_step(self) -> None:
        self.done = {}
        self._pending_collective = self.on and self.cfg.collective_ms > 0

    def _timed(self, kind: str, work: Callable[[], Any]) -> None:
        start = time.perf_counter_ns()
        work()
        self.done[kind] = self.done.get(kind, 0.0) + (time.perf_counter_ns() - start) / 1e6

    def host(self) -> None:
        if self.on and self.cfg.host_ms > 0:
            spend = _burn_ms if self.cfg.host_mode == "burn" else _sleep_ms
            self._timed("host", lambda: spend(self.cfg.host_ms))

    def data(self) -> None:
        if self.on and self.cfg.data_ms > 0:
            self._timed("data", lambda: _sleep_ms(self.cfg.data_ms))

    def compute(self) -> None:
        if not (self.on and self.cfg.compute_ms > 0):
            return
        n = MATMUL_N.get(self.device.type, MATMUL_N["cuda"])
        a = torch.randn(n, n, device=self.device)
        if self.device.type == "cpu":  # until the time is spent: the CPU is the device
            end = time.perf_counter_ns() + int(self.cfg.compute_ms * 1e6)
            start = time.perf_counter_ns()
            while time.perf_counter_ns() < end:
                torch.mm(a, a)
            self.done["compute"] = (time.perf_counter_ns() - start) / 1e6
            return
        if self._matmul_ms is None:
            self._matmul_ms = _calibrate(a)
        count = max(1, round(self.cfg.compute_ms / self._matmul_ms))
        for _ in range(count):  # queued, no sync: the device's time, not the host's
            torch.mm(a, a)
        self.done["compute"] = count * self._matmul_ms

    def _before_collective(self) -> None:
        if self._pending_collective:
            self._pending_collective = False
            self._timed("collective", lambda: _sleep_ms(self.cfg.collective_ms))

    @contextmanager
    def delayed_collectives(self) -> Iterator[None]:
        """While the block runs, the step's first all_reduce/reduce_scatter waits
        ``collective_ms`` on the slowed rank (the module attributes FSDP2 and our DDP hook
        call, as :mod:`aorta_core.benchmark.collectives` patches them)."""
        names = DELAYED if self.on and self.cfg.collective_ms > 0 else ()
        with replaced(names, lambda _, current: self._delayed(current)):
            yield

    def _delayed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def delayed(*args: Any, **kwargs: Any) -> Any:
            self._before_collective()
            return original(*args, **kwargs)
        return delayed

    def record(self) -> dict[str, float] | None:
        """What this step injected (ms, measured on the host), for the rank's JSONL."""
        return {k: round(v, 3) for k, v in self.done.items()} if self.on else None


def _calibrate(a: torch.Tensor) -> float:
    """ms of one matmul on the GPU (CUDA events, after a warm-up)."""
    torch.mm(a, a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(_CALIBRATION_MATMULS):
        torch.mm(a, a)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / _CALIBRATION_MATMULS
