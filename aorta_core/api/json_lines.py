"""A JSON file that may hold several documents, one per line (JSON Lines).

Proton 3.6 writes its ``data=trace`` chrome trace so: one ``{"displayTimeUnit": "us",
"traceEvents": [...]}`` per GPU stream, each on a line of its own, all timed from the same first
kernel (``TraceData::dumpChromeTrace`` in Triton's third_party/proton). A reader that decodes one
document stops at the second line ("trailing characters"), and a run with two streams lost its
kernels and its timeline lane.
"""

from __future__ import annotations

from typing import Any

import msgspec


def decode_documents(text: Any, decoder: msgspec.json.Decoder) -> list[Any]:
    """The documents of ``text``: one JSON document, else one per line; the first
    ``msgspec.DecodeError`` when neither reads (a document broken or cut off is not taken for
    several)."""
    try:
        return [decoder.decode(text)]
    except msgspec.DecodeError as exc:
        if "trailing characters" not in str(exc):
            raise
        try:
            return decoder.decode_lines(text)
        except msgspec.DecodeError:
            raise exc from None
