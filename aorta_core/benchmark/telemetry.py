"""Rank JSONL records, the run summary, and the metrics file the sweep matrix reads."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.files import write_atomic
from aorta_core.benchmark.schema import SCHEMA_VERSION, GpuSample, Profile, RankRecord
from aorta_core.benchmark.stream_overlap import comm_union_ms, compute_overlap
from aorta_core.benchmark.stream_timing import IterationTiming

PHASES = ("data", "forward", "backward", "grad_clip", "optimizer")
COMM = ("allreduce", "reducescatter", "allgather")


def metrics_file(output_dir: Path, rank: int) -> Path:
    """``rank_<RR>_metrics.jsonl``: two-digit padding, as upstream's overlap report expects."""
    return output_dir / f"rank_{rank:02d}_metrics.jsonl"


@dataclass
class StepInfo:
    rank: int
    world_size: int
    epoch: int
    step: int
    global_step: int
    loss: float
    grad_norm: float | None
    lr: float
    device: str
    time_start_unix_ns: int
    time_end_unix_ns: int
    step_time_ms: float
    samples: int  # samples processed by all ranks this step
    flops: int  # counted FLOPs of this rank's step
    injected_ms: dict[str, float] | None = None  # inject.*: what this rank's step injected


def build_record(info: StepInfo, timing: IterationTiming, comm_calls: dict[str, int],
                 gpu: GpuSample | None) -> RankRecord:
    """One JSONL line; stream and overlap fields only when CUDA events timed them."""
    seconds = info.step_time_ms / 1e3
    extra: dict[str, Any] = {}
    if timing.clock != "none":
        phase = defaultdict(float)
        for r in timing.ranges:
            phase[r.kind] += r.duration_ms
        extra["phase_ms"] = {k: phase[k] for k in PHASES if k in phase}
        extra["comm_ms"] = {k: phase[k] for k in COMM if k in phase}
        extra["comm_calls"] = dict(comm_calls)
        profile: dict[str, Any] = {"index": info.global_step, "total_ms": timing.total_ms,
                                   "clock": timing.clock, "ranges": timing.ranges, "markers": []}
        if timing.clock == "cuda_event":
            overlap = compute_overlap(timing.ranges, timing.total_ms)
            profile["overlap"] = overlap
            extra.update(_flat_overlap(overlap, timing, info.flops))
        extra["profile"] = Profile(**profile)
    if gpu is not None:
        extra["gpu"] = gpu
    if info.injected_ms is not None:
        extra["injected_ms"] = info.injected_ms
    return RankRecord(
        schema_version=SCHEMA_VERSION, rank=info.rank, world_size=info.world_size,
        epoch=info.epoch, step=info.step, global_step=info.global_step, loss=info.loss,
        grad_norm=info.grad_norm, lr=info.lr, device=info.device, telemetry=timing.clock != "none",
        time_start_unix_ns=info.time_start_unix_ns, time_end_unix_ns=info.time_end_unix_ns,
        step_time_ms=info.step_time_ms,
        samples_per_s=info.samples / seconds if seconds > 0 else 0.0,
        tflops=info.flops / seconds / 1e12 if seconds > 0 else 0.0,
        **extra,
    )


def _flat_overlap(overlap: Any, timing: IterationTiming, flops: int) -> dict[str, float]:
    per, ov = overlap.per_stream_ms, overlap.overlap_ms
    compute_ms = sum(r.duration_ms for r in timing.ranges if r.kind in ("forward", "backward"))
    flat = {
        "compute_ms": per["compute"], "allreduce_ms": per["allreduce"],
        "reducescatter_ms": per["reducescatter"], "aux_ms": per["aux"],
        "compute_allreduce_ms": ov.compute_allreduce,
        "compute_reducescatter_ms": ov.compute_reducescatter,
        "compute_allgather_ms": ov.compute_allgather, "compute_comm_ms": ov.compute_comm,
        "idle_ms": ov.idle,
    }
    if per["compute"] > 0:
        flat["overlap_ratio"] = ov.compute_comm / per["compute"]
    comm = comm_union_ms(timing.ranges)
    if comm > 0:
        flat["comm_hidden_ratio"] = ov.compute_comm / comm
    if compute_ms > 0:
        flat["compute_tflops"] = flops / (compute_ms / 1e3) / 1e12
    return flat


class JsonlWriter:
    """Appends one encoded record per line and flushes, so a crash keeps what was measured."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("wb")
        self._encoder = msgspec.json.Encoder()

    def write(self, record: RankRecord) -> None:
        self._file.write(self._encoder.encode(record) + b"\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@dataclass
class Summary:
    """Run-level numbers from this rank's measured steps (the first ``skip`` are warm-up)."""

    skip: int
    records: list[RankRecord] = field(default_factory=list)
    wall_start_ns: int | None = None
    wall_end_ns: int | None = None

    def add(self, record: RankRecord, wall_start_ns: int, wall_end_ns: int) -> None:
        self.records.append(record)
        if len(self.records) == self.skip + 1:
            self.wall_start_ns = wall_start_ns
        self.wall_end_ns = wall_end_ns

    def metrics(self) -> dict[str, float | int]:
        """Flat numbers for the matrix; a number that was not measured is left out."""
        measured = self.records[self.skip:] or self.records
        if not measured:
            return {}
        out: dict[str, float | int] = {
            "steps": len(self.records),
            "world_size": measured[-1].world_size,
            "loss_final": measured[-1].loss,
            "step_time_ms": statistics.median(r.step_time_ms for r in measured),
            "samples_per_s": statistics.median(r.samples_per_s for r in measured),
            "tflops": statistics.median(r.tflops for r in measured),
        }
        if self.wall_start_ns is not None and self.wall_end_ns is not None and \
                len(self.records) > self.skip:
            n = len(self.records) - self.skip
            out["wall_ms_per_step"] = (self.wall_end_ns - self.wall_start_ns) / 1e6 / n
        for key in ("overlap_ratio", "comm_hidden_ratio", "compute_ms", "compute_comm_ms",
                    "compute_allreduce_ms", "compute_reducescatter_ms", "compute_allgather_ms",
                    "idle_ms", "compute_tflops"):
            values = [getattr(r, key) for r in measured if isinstance(getattr(r, key), float)]
            if values:
                out[key] = statistics.fmean(values)
        return out


def write_metrics_atomic(path: Path, metrics: dict[str, Any]) -> None:
    """Write the flat metrics object via a temp file + rename (readers never see half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, msgspec.json.encode(metrics))
