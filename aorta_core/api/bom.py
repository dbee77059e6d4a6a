"""A leading UTF-8 byte order mark: Windows editors and some exporters write one, and JSON
decoders (msgspec, orjson) refuse it while ``csv`` reads it into the first column's name, so an
artifact or record that starts with one would be dropped. Every reader of a text file aorta or
a collector did not write itself passes the bytes through :func:`without_bom` first."""

from __future__ import annotations

import codecs
import mmap
from collections.abc import Iterator
from contextlib import contextmanager

BOM = codecs.BOM_UTF8


@contextmanager
def without_bom(data: bytes | mmap.mmap) -> Iterator[bytes | mmap.mmap | memoryview]:
    """``data`` past a leading BOM, inside the ``with`` block: ``data`` itself when it has none,
    else a view of the rest (no copy of a 160 MB trace), released when the block ends, so a
    memory map under it can be closed. For decoders that copy out what they keep."""
    if data[:3] != BOM:
        yield data
        return
    with memoryview(data) as whole, whole[3:] as rest:
        yield rest
