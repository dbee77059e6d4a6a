"""Decode one Kineto chrome trace (``.json`` or ``.json.gz``) into the few columns we use.

The fast path decodes straight into typed msgspec Structs holding only the fields the
metrics need, so the 100k-1M events of a real trace never become dicts; a trace whose fields
carry unexpected types falls back to a tolerant generic decode. ``ts``/``dur`` are µs.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api import decode_pieces, json_number, rank_from_name

#: Event categories that run on a device lane (HTA: events with a stream); compared as
#: written, lowercase in Kineto, capitalised in some older traces.
GPU_CATS = frozenset(
    c
    for base in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
    for c in (base, base.capitalize())
)
NO_CORRELATION = -1
#: A span or timestamp beyond 2**63 ns cannot come from a real clock (a wrapped or corrupt
#: value); events carrying one are left out, so that no sum overflows.
MAX_US = 2**63 / 1e3


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None


class _Event(msgspec.Struct, gc=False):
    """The fields every metric needs; decoding only these keeps parsing near the floor."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    dur: float = 0.0
    #: The launch correlation: a kernel's step is its runtime launch's (``kernel_table``).
    args: _Args | None = None


class _FullEvent(_Event, gc=False):
    """Plus thread lanes: CPU self time."""

    pid: int | str = 0
    tid: int | str = 0


class _Dist(msgspec.Struct, gc=False):
    rank: int | None = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []
    distributedInfo: _Dist | None = None


class _FullTrace(msgspec.Struct, gc=False):
    traceEvents: list[_FullEvent] = []
    distributedInfo: _Dist | None = None


_DECODERS = {False: msgspec.json.Decoder(_Trace), True: msgspec.json.Decoder(_FullTrace)}
_EVENTS = msgspec.json.Decoder(list[_Event])
_ANY = msgspec.json.Decoder()


@dataclass
class Trace:
    """The decoded events of one trace file plus its rank."""

    path: Path
    rank: int
    events: list[Any] = field(default_factory=list)


def decode_lane(path: Path, data: bytes | mmap.mmap) -> Trace:
    """The GPU-lane events of a trace (:data:`GPU_CATS`), decoded piece by piece where it is
    big (:func:`aorta_core.api.decode_pieces`: the other 92 % of a 145 MB trace's events are
    never held at once); ``ValueError`` as :func:`decode`."""
    pieces = decode_pieces(data, _DECODERS[False], _EVENTS, lane_and_steps)
    if pieces is None:
        trace = decode(path, data)
        trace.events = lane_and_steps(trace.events)
        return trace
    docs, events = pieces
    rank = next((d.distributedInfo.rank for d in docs if d.distributedInfo), None)
    return Trace(path, rank if _is_int(rank) else rank_from_name(path), events)


#: CPU launches of GPU work, joined to their kernels by ``args.correlation``.
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
STEP_PREFIX = "ProfilerStep#"


def lane_and_steps(events: list[Any]) -> list[Any]:
    """The events of a device lane, their launches and the profiler steps."""
    return [e for e in events if e.cat in GPU_CATS or e.cat in LAUNCH_CATS
            or e.name.startswith(STEP_PREFIX)]


def on_gpu_lane(events: list[Any]) -> list[Any]:
    """The events of a device lane (:data:`GPU_CATS`)."""
    return [e for e in events if e.cat in GPU_CATS]


def decode(path: Path, data: bytes | mmap.mmap, full: bool = False) -> Trace:
    """Decode a trace's bytes (``full``: with lanes and correlations); ``ValueError`` when it
    is not a Kineto trace."""
    try:
        try:
            doc = _DECODERS[full].decode(data)
            dist_rank = doc.distributedInfo.rank if doc.distributedInfo else None
            events: list[Any] = doc.traceEvents
        except msgspec.ValidationError:
            dist_rank, events = _tolerant(data)
    except (msgspec.DecodeError, RecursionError) as exc:  # nesting deeper than msgspec goes
        raise ValueError(f"not valid JSON: {exc}") from exc
    return Trace(path, dist_rank if _is_int(dist_rank) else rank_from_name(path), events)


def plausible(event: Any) -> bool:
    """A complete event with a real clock's span (see :data:`MAX_US`)."""
    return event.ph == "X" and 0 <= event.dur <= MAX_US and -MAX_US <= event.ts <= MAX_US


def _tolerant(data: bytes) -> tuple[Any, list[_FullEvent]]:
    """Decode a trace whose fields have odd types; keep only well-formed events."""
    doc = _ANY.decode(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("no traceEvents list: not a Kineto chrome trace")
    dist = doc.get("distributedInfo")
    events = [ev for ev in map(_event, doc["traceEvents"]) if ev is not None]
    return (dist.get("rank") if isinstance(dist, dict) else None), events


def _event(raw: Any) -> _FullEvent | None:
    if not isinstance(raw, dict):
        return None
    ts, dur = _float(raw.get("ts", 0.0)), _float(raw.get("dur", 0.0))
    if ts is None or dur is None:
        return None
    args = raw.get("args")
    corr = args.get("correlation") if isinstance(args, dict) else None
    return _FullEvent(
        ph=_text(raw.get("ph")),
        cat=_text(raw.get("cat")),
        name=_text(raw.get("name")),
        ts=ts,
        dur=dur,
        pid=_lane(raw.get("pid")),
        tid=_lane(raw.get("tid")),
        args=_Args(corr if _is_int(corr) else None),
    )


def _is_int(value: Any) -> bool:
    """An int within 64 bits (not a bool): what a rank or a correlation id can be."""
    return type(json_number(value)) is int


def _float(value: Any) -> float | None:
    """A JSON number (not a bool) as a float; ``None`` beyond float range (400 digits)."""
    number = None if isinstance(value, bool) else json_number(value)
    return None if number is None else float(number)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _lane(value: Any) -> int | str:
    return value if isinstance(value, int | str) and not isinstance(value, bool) else ""
