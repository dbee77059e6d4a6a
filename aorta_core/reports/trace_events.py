"""Trace Event Format in and out: read any collector's chrome traces, stream one merged file.

Events decode into one typed msgspec Struct whose ``args`` stay raw JSON bytes, so a merge
re-emits them without building a dict per event; each rank's events are encoded as they come
into a stream of its own, which the output splices in, so no process holds more than one rank's
events, and the merged file's writer none. Output ids are namespaced
(:class:`Lanes`): ranks and sources reuse pids, tids and flow ids, and Perfetto would otherwise
join unrelated lanes and arrows.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
from msgspec import UNSET, UnsetType

from aorta_core.api.bom import without_bom
from aorta_core.api.files import AtomicFile, mapped_limited, read_limited
from aorta_core.api.json_lines import decode_documents
from aorta_core.api.trace_pieces import decode_pieces

#: Flow ids of one input file are shifted into their own block of this size.
_FLOW_BLOCK = 1 << 32
#: What a splice copies at a time.
_COPY_CHUNK = 1 << 20
#: The process metadata an output lane gets from us; any other ``M`` event is forwarded.
_OURS = frozenset({"process_name", "process_sort_index"})


class Event(msgspec.Struct, omit_defaults=True, gc=False):
    """One trace event; fields absent in the input stay absent in the output."""

    ph: str = ""
    name: str | UnsetType = UNSET
    cat: str | UnsetType = UNSET
    ts: float | UnsetType = UNSET
    dur: float | UnsetType = UNSET
    pid: int | str | UnsetType = UNSET
    tid: int | str | UnsetType = UNSET
    id: int | str | UnsetType = UNSET
    bp: str | UnsetType = UNSET
    s: str | UnsetType = UNSET
    cname: str | UnsetType = UNSET
    args: msgspec.Raw | UnsetType = UNSET


class TraceDoc(msgspec.Struct, gc=False):
    """A chrome trace, with ``baseTimeNanoseconds`` (as Kineto writes) or without."""

    traceEvents: list[Event]
    baseTimeNanoseconds: int | None = None


_DECODER = msgspec.json.Decoder(TraceDoc)
_ENCODER = msgspec.json.Encoder()

#: All that Unix time in int64 ns holds (292 years from 1970, to 2262).
UNIX_NS_LIMIT = 2**63
#: The largest time or duration an event may carry, µs. Kineto writes µs since 1970 (1.7e15)
#: or since its base; a time past this (1e308, a counter gone wild) lies on no clock and would
#: stretch the timeline over centuries, or overflow when made ns.
TIME_LIMIT_US = UNIX_NS_LIMIT / 1e3


def off_the_clock(path: Path, count: int) -> str:
    """The one line that says a file's events beyond :data:`TIME_LIMIT_US` were left out."""
    return (f"{path}: {count} event(s) left out: their ts or dur lies beyond 2^63 ns (292 "
            "years), on no clock")


def on_the_clock(events: list[Event], base_us: float = 0.0) -> list[Event]:
    """The events whose time (``base_us + ts``) and ``dur``, where given, lie within
    :data:`TIME_LIMIT_US`."""
    low, high = -TIME_LIMIT_US - base_us, TIME_LIMIT_US - base_us
    return [ev for ev in events if (ev.ts is UNSET or low <= ev.ts <= high)
            and (ev.dur is UNSET or -TIME_LIMIT_US <= ev.dur <= TIME_LIMIT_US)]


def raw(obj: Any) -> msgspec.Raw:
    """``args`` of an event we make."""
    return msgspec.Raw(_ENCODER.encode(obj))


def _documents(text: Any, decoder: msgspec.json.Decoder) -> Any:
    """One trace of a file that holds one document or several, one per line (Proton 3.6 writes
    one per GPU stream, timed from one start): the first, with every document's events."""
    first, *more = decode_documents(text, decoder)
    if more:
        first.traceEvents = [ev for doc in (first, *more) for ev in doc.traceEvents]
    return first


def read_trace(path: Path, root: Path | None = None,
               decoder: msgspec.json.Decoder | None = None,
               pieces: tuple[msgspec.json.Decoder, Callable[[list[Any]], list[Any]]] | None = None
               ) -> Any:
    """Decode a chrome trace (a regular file, inside ``root`` once links are resolved) into a
    :class:`TraceDoc`; ``ValueError`` with a one-line reason when it is not one. A ``decoder``
    of fewer fields (a reader's own types, which must keep no view of their input: no
    ``msgspec.Raw``) decodes from a memory map of the file, not a copy of it. ``pieces``, with a
    ``decoder``: (a decoder of a list of its events, the filter of the events to keep): a big
    trace is decoded piece by piece (:func:`~aorta_core.api.trace_pieces.decode_pieces`) and the
    document comes back with the kept events and the fields written before them."""
    try:
        if decoder is None:
            return _documents(read_limited(path, root), _DECODER)
        with mapped_limited(path, root) as data, without_bom(data) as text:
            done = decode_pieces(text, decoder, *pieces) if pieces else None
            if done is None:
                doc = _documents(text, decoder)
                if pieces:
                    doc.traceEvents = pieces[1](doc.traceEvents)
                return doc
            (doc, _), kept = done
            doc.traceEvents = kept
            return doc
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"unreadable ({exc})") from exc
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a chrome trace ({exc})") from exc
    except msgspec.DecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from exc
    except RecursionError:  # msgspec's limit: arrays or objects (an event's args) 1000s deep
        raise ValueError("not a chrome trace aorta can read (JSON nested too deeply)") from None




@dataclass
class _Process:
    pid: int
    source: int  # position of the source in the rank's lane group
    label: str
    order: tuple[Any, ...]
    threads: dict[Any, int] = field(default_factory=dict)
    thread_names: dict[Any, str] = field(default_factory=dict)


class Lanes:
    """Output pids and tids unique over the whole file: one process per (rank, source, input
    pid), one thread per input tid of it; one block of flow ids per input file.

    Process names start with ``rank <R>`` and sort indexes order ranks, then sources, so each
    rank's lanes stay together in Perfetto and chrome://tracing. Ranks merged apart share no
    counter: of ``n`` ranks, the k-th numbers its lanes ``k + 1``, ``k + 1 + n``, ... (``first_id``
    and ``id_step``; as short as one counter's ids, whatever each rank's count) and its flow ids
    from the blocks of the files before it (``first_flow_block``).
    """

    def __init__(self, first_id: int = 1, id_step: int = 1, first_flow_block: int = 1) -> None:
        self._next_id = first_id
        self._id_step = id_step
        self._next_flow_block = first_flow_block
        self._procs: dict[tuple[int, str, Any], _Process] = {}

    def _new_id(self) -> int:
        self._next_id += self._id_step
        return self._next_id - self._id_step

    def process(self, rank: int, source: str, position: int, key: Any, label: str,
                order: tuple[Any, ...] = ()) -> _Process:
        """The output process of input process ``key`` of ``source`` (``position`` orders
        the sources of a rank, ``order`` the processes of a source)."""
        proc = self._procs.get((rank, source, key))
        if proc is None:
            proc = _Process(self._new_id(), position, label, order)
            self._procs[(rank, source, key)] = proc
        return proc

    def thread(self, proc: _Process, key: Any, name: str | None = None) -> int:
        """The output tid of input tid ``key``; ``name`` labels it unless the input does."""
        tid = proc.threads.get(key)
        if tid is None:
            tid = proc.threads[key] = self._new_id()
            if name is not None:
                proc.thread_names[key] = name
        return tid

    def flow_block(self) -> int:
        """The offset of a fresh block of flow ids (one per input file)."""
        self._next_flow_block += 1
        return (self._next_flow_block - 1) * _FLOW_BLOCK

    def close_rank(self, rank: int, forwarded: Sequence[tuple[_Process, Any, Event]] = ()
                   ) -> list[Event]:
        """The metadata of ``rank``'s lanes, then forget them: our process names and sort
        indexes, default thread names, and the inputs' other ``M`` events (``forwarded``: the
        process, the input lane's key as given to :meth:`thread` or ``None`` for process-level
        ones, and the event)."""
        procs = sorted((p for (r, _, _), p in self._procs.items() if r == rank),
                       key=lambda p: (p.source, p.order, p.pid))
        named = {(p.pid, k) for p, k, e in forwarded if e.name == "thread_name"}
        out: list[Event] = []
        for index, proc in enumerate(procs):
            out.append(Event(ph="M", name="process_name", pid=proc.pid, tid=0,
                             args=raw({"name": f"rank {rank} · {proc.label}"})))
            out.append(Event(ph="M", name="process_sort_index", pid=proc.pid, tid=0,
                             args=raw({"sort_index": rank * 1000 + index})))
            for key, name in proc.thread_names.items():
                if (proc.pid, key) not in named:
                    out.append(Event(ph="M", name="thread_name", pid=proc.pid,
                                     tid=proc.threads[key], args=raw({"name": name})))
        seen = set()
        for proc, key, event in forwarded:
            tid = 0 if key is None else proc.threads.get(key)
            args = bytes(event.args) if event.args is not UNSET else b""
            if event.name in _OURS or tid is None or (proc.pid, tid, event.name, args) in seen:
                continue  # ours, a lane without events, or the same line from another cycle
            seen.add((proc.pid, tid, event.name, args))
            event.pid, event.tid, event.ts = proc.pid, tid, UNSET
            out.append(event)
        self._procs = {k: p for k, p in self._procs.items() if k[0] != rank}
        return out


class EventStream:
    """Events written to a binary file as comma-separated JSON objects, a batch at a time; a
    stream another process wrote is spliced in by copying its bytes."""

    BATCH = 100_000

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self.count = 0

    def write(self, events: Sequence[Event]) -> None:
        for start in range(0, len(events), self.BATCH):
            batch = events[start:start + self.BATCH]
            if self.count:
                self._fh.write(b",\n")
            self._fh.write(_ENCODER.encode(batch)[1:-1])
            self.count += len(batch)

    def splice(self, path: Path, count: int) -> None:
        """Append the ``count`` events another stream wrote to ``path``."""
        if not count:
            return
        if self.count:
            self._fh.write(b",\n")
        with path.open("rb") as fh:
            shutil.copyfileobj(fh, self._fh, _COPY_CHUNK)
        self.count += count


class TraceWriter(EventStream):
    """Writes ``{"traceEvents": [...], <extra keys>}`` as events come; gzip when the name ends
    in ``.gz``. Written to a temp file and renamed on :meth:`close`, so a reader never sees half
    a file; an exception inside ``with`` removes the temp file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = AtomicFile(path)  # committed by close(), discarded by abort()
        super().__init__(gzip.GzipFile(fileobj=self._out.fh, mode="wb")
                         if path.name.endswith(".gz") else self._out.fh)
        self._fh.write(b'{"traceEvents":[\n')

    def close(self, extra: dict[str, Any]) -> None:
        self._fh.write(b"\n]")
        for key, value in extra.items():
            self._fh.write(b"," + _ENCODER.encode(key) + b":" + _ENCODER.encode(value))
        self._fh.write(b"}\n")
        self._fh.close()
        self._out.commit()

    def abort(self) -> None:
        with contextlib.suppress(OSError):  # gzip's trailer cannot go to a full disk: dropped
            self._fh.close()
        self._out.discard()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            self.abort()
