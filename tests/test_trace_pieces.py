"""A chrome trace decoded piece by piece keeps exactly what the whole decode keeps, or says it
cannot be cut (then the reader decodes it whole): on the real H200 trace, minified, and on
generated documents whose strings and arguments hold what a cut looks for."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_core.api import decode_pieces, mapped_limited

FIXTURE = (Path(__file__).resolve().parents[1] / "plugins" / "aorta_torchprof" / "tests"
           / "fixtures" / "cuda_h200" / "torchprof" / "rank0.step5.pt.trace.json")


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0


class _Rank(msgspec.Struct):
    rank: int | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []
    distributedInfo: _Rank | None = None


_DOC, _EVENTS = msgspec.json.Decoder(_Doc), msgspec.json.Decoder(list[_Event])


def _kernels(events: list[_Event]) -> list[_Event]:
    return [e for e in events if e.ph == "X" and e.cat == "kernel"]


def _both(text: bytes | memoryview, piece_bytes: int):
    whole = _DOC.decode(text)
    return (_kernels(whole.traceEvents), whole.distributedInfo), decode_pieces(
        text, _DOC, _EVENTS, _kernels, piece_bytes)


def test_the_real_trace_in_pieces_keeps_what_the_whole_keeps() -> None:
    text = FIXTURE.read_bytes()
    for piece_bytes in (4096, 20_000, len(text) // 3):
        (kept, rank), pieces = _both(text, piece_bytes)
        assert pieces is not None, piece_bytes
        docs, kept_in_pieces = pieces
        assert kept_in_pieces == kept and len(kept) > 50
        assert docs[0].distributedInfo == rank
    minified = msgspec.json.encode(json.loads(text))  # "},{" between events
    (kept, _), pieces = _both(minified, 4096)
    assert pieces is not None and pieces[1] == kept


def test_a_mapped_file_is_read_in_pieces_and_its_pages_given_back() -> None:
    with mapped_limited(FIXTURE) as data:
        pieces = decode_pieces(data, _DOC, _EVENTS, _kernels, 4096)
        assert pieces is not None
        assert pieces[1] == _kernels(_DOC.decode(data).traceEvents)


def _mapped_kib(path: Path) -> int:
    """The resident KiB of this process's maps of ``path`` (Linux's /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0]:  # a mapping's header line
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_only_the_pieces_being_read_are_mapped(tmp_path: Path) -> None:
    """A 24 MB trace in 1 MB pieces: while a piece is read, the file's resident pages are those
    of about the pieces around it, not the whole file (looking for every cut first mapped the
    pages around each one: on kernels whose page cache holds large folios, most of the file)."""
    events = [{"ph": "X", "cat": "kernel" if i % 7 else "cpu_op", "name": f"k{i % 50}",
               "ts": float(i), "dur": 1.0, "args": {"correlation": i}} for i in range(240_000)]
    path = tmp_path / "big.pt.trace.json"
    path.write_bytes(msgspec.json.encode({"traceEvents": events}))
    seen = []

    def keep(piece: list[_Event]) -> list[_Event]:
        seen.append(_mapped_kib(path))
        return _kernels(piece)

    with mapped_limited(path) as data:
        pieces = decode_pieces(data, _DOC, _EVENTS, keep, 1 << 20)
        assert pieces is not None and len(seen) > 20
        assert len(pieces[1]) == sum(1 for i in range(240_000) if i % 7)
    assert path.stat().st_size > 20 << 20
    assert max(seen) <= 8 << 10, seen  # KiB: a few pieces and the folios at their ends


def test_small_or_arrayless_documents_are_left_whole() -> None:
    assert decode_pieces(FIXTURE.read_bytes(), _DOC, _EVENTS, _kernels) is None  # < 2 pieces
    assert decode_pieces(b'{"events": [' + b'{"a": 1},' * 5000 + b'{}]}', _DOC, _EVENTS,
                         _kernels, 1024) is None


def test_a_long_array_after_the_events_is_not_taken_for_events() -> None:
    after = ", ".join(json.dumps({"cpu": i, "name": "x", "cat": "kernel"}) for i in range(3000))
    text = (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}], "samples": ['
            + after.encode() + b"]}")
    pieces = decode_pieces(text, _DOC, _EVENTS, list, 4096)  # keeping every object
    assert pieces is None  # the cuts fell in "samples": its objects have no ph


_TEXT = st.text(alphabet=st.sampled_from(list('ab{}[],: "\\\n\u00e9')), max_size=12)
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "M"]), "cat": st.sampled_from(["kernel", "cpu_op"]),
     "name": _TEXT, "ts": st.integers(0, 10**6)},
    optional={"args": st.dictionaries(_TEXT, st.one_of(
        _TEXT, st.lists(st.dictionaries(_TEXT, st.integers(), max_size=2), max_size=3)),
        max_size=2)})


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_EVENT, min_size=1, max_size=40), indent=st.sampled_from([None, 0, 2]),
       rank_first=st.booleans(), piece_bytes=st.integers(16, 400))
def test_cuts_never_change_what_is_read(events, indent, rank_first, piece_bytes) -> None:
    body = {"traceEvents": events, "traceName": "t},{x"}
    doc = {"distributedInfo": {"rank": 3}, **body} if rank_first else {
        **body, "distributedInfo": {"rank": 3}}
    (kept, rank), pieces = _both(json.dumps(doc, indent=indent).encode(), piece_bytes)
    if pieces is not None:
        docs, kept_in_pieces = pieces
        assert kept_in_pieces == kept
        assert rank in (docs[0].distributedInfo, docs[1].distributedInfo)
