"""The rank JSONL record, as msgspec Structs: the writer encodes them, tests decode with them.

Field names follow upstream aorta (``rank``, ``epoch``, ``profile.overlap.overlap_ms`` ...) so its
overlap report keeps working; the flat overlap keys, wall-clock timestamps and throughput are
ours. A field that was not measured is left out of the line (``UNSET``), never written as 0 or
null: on CPU there are no CUDA streams, so every stream/overlap field is absent there.
docs/telemetry-schema.md describes each field.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

SCHEMA_VERSION = 1

Number = int | float


class Range(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One timed interval of an iteration, in ms from the iteration start."""

    #: data | forward | backward | grad_clip | optimizer | allreduce | reducescatter | allgather
    kind: str
    tag: str
    start_ms: float
    end_ms: float
    duration_ms: float
    stream: str | UnsetType = UNSET  # CUDA only: compute | allreduce | reducescatter | aux
    metadata: dict[str, str | Number] = {}


class Marker(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    tag: str
    time_ms: float
    stream: str | UnsetType = UNSET
    metadata: dict[str, str | Number] = {}


class OverlapMs(msgspec.Struct, forbid_unknown_fields=True):
    compute_allreduce: float
    compute_reducescatter: float
    compute_allgather: float
    compute_comm: float
    idle: float


class Segment(msgspec.Struct, forbid_unknown_fields=True):
    start_ms: float
    end_ms: float
    active_streams: list[str]


class Overlap(msgspec.Struct, forbid_unknown_fields=True):
    per_stream_ms: dict[str, float]
    overlap_ms: OverlapMs
    active_segments: list[Segment]
    utilization: dict[str, float]


class Profile(msgspec.Struct, forbid_unknown_fields=True):
    index: int
    total_ms: float
    clock: str  # cuda_event | wall
    ranges: list[Range]
    markers: list[Marker]
    overlap: Overlap | UnsetType = UNSET


class GpuSample(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One sample of the GPU's state; each value only when the tool reported it."""

    source: str  # nvml | amd-smi | rocm-smi
    sm_clock_mhz: float | UnsetType = UNSET
    mem_clock_mhz: float | UnsetType = UNSET
    power_w: float | UnsetType = UNSET
    temperature_c: float | UnsetType = UNSET
    memory_used_bytes: int | UnsetType = UNSET
    memory_total_bytes: int | UnsetType = UNSET
    utilization_pct: float | UnsetType = UNSET
    throttle_reasons: list[str] | UnsetType = UNSET


class RankRecord(msgspec.Struct, forbid_unknown_fields=True):
    """One line of ``rank_<RR>_metrics.jsonl``: one training iteration on one rank."""

    schema_version: int
    rank: int
    world_size: int
    epoch: int
    step: int
    global_step: int
    loss: float
    grad_norm: float | None
    lr: float
    device: str  # cpu | cuda
    telemetry: bool
    time_start_unix_ns: int
    time_end_unix_ns: int
    step_time_ms: float
    samples_per_s: float
    tflops: float
    # Wall-clock (CPU) or CUDA-event (GPU) time per phase; absent with telemetry off.
    phase_ms: dict[str, float] | UnsetType = UNSET
    comm_ms: dict[str, float] | UnsetType = UNSET
    comm_calls: dict[str, int] | UnsetType = UNSET
    # CUDA only (stream timing): absent on CPU and with telemetry off.
    compute_ms: float | UnsetType = UNSET
    allreduce_ms: float | UnsetType = UNSET
    reducescatter_ms: float | UnsetType = UNSET
    aux_ms: float | UnsetType = UNSET
    compute_allreduce_ms: float | UnsetType = UNSET
    compute_reducescatter_ms: float | UnsetType = UNSET
    compute_allgather_ms: float | UnsetType = UNSET
    compute_comm_ms: float | UnsetType = UNSET
    idle_ms: float | UnsetType = UNSET
    overlap_ratio: float | UnsetType = UNSET
    comm_hidden_ratio: float | UnsetType = UNSET
    compute_tflops: float | UnsetType = UNSET
    profile: Profile | UnsetType = UNSET
    # inject.*: on the slowed rank only, what its step injected (host, data, compute,
    # collective: ms measured on the host).
    injected_ms: dict[str, float] | UnsetType = UNSET
    gpu: GpuSample | UnsetType = UNSET


def decode_line(line: bytes | str) -> RankRecord:
    """Validate one JSONL line against the schema (raises ``msgspec.ValidationError``)."""
    return msgspec.json.decode(line, type=RankRecord)
