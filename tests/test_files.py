"""Bounded reads of files aorta did not write: ``read_limited`` and its zero-copy twin
``mapped_limited`` give the same bytes and refuse the same files."""

from __future__ import annotations

import gzip
import mmap
import os
from pathlib import Path

import pytest

from aorta_core import FileRefused, mapped_limited, read_limited

CONTENT = b'{"traceEvents": [{"ph": "X", "name": "caf\xc3\xa9", "ts": 1, "dur": 2}]}\n' * 50


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_mapped_gives_what_read_gives(tmp_path: Path, name: str):
    path = tmp_path / name
    path.write_bytes(gzip.compress(CONTENT) if name.endswith(".gz") else CONTENT)
    with mapped_limited(path, tmp_path) as data:
        assert bytes(data) == read_limited(path, tmp_path) == CONTENT
        mapped = data
    if isinstance(mapped, mmap.mmap):  # the plain file was mapped, and is unmapped after
        assert name == "t.json" and mapped.closed
    else:
        assert name == "t.json.gz"


def test_an_empty_file_is_empty_bytes(tmp_path: Path):
    (tmp_path / "empty.json").write_bytes(b"")
    with mapped_limited(tmp_path / "empty.json") as data:
        assert data == b""


def test_over_the_limit_is_refused_before_mapping(tmp_path: Path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (3 << 20))
    with (pytest.raises(FileRefused, match=r"big.json is 3.0 MiB, over the 2 MiB read limit; "
                                           r"raise it with read_limit_mb=<MiB>"),
          mapped_limited(path, limit=2 << 20)):
        pass
    gz = tmp_path / "bomb.json.gz"
    gz.write_bytes(gzip.compress(b" " * (3 << 20)))
    with (pytest.raises(FileRefused, match="decompresses to more than the 2 MiB read limit"),
          mapped_limited(gz, limit=2 << 20)):
        pass


def test_fifos_and_links_out_are_refused_without_blocking(tmp_path: Path):
    os.mkfifo(tmp_path / "fifo.json")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_bytes(CONTENT)
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "link.json").symlink_to(outside)
    try:
        with (pytest.raises(FileRefused, match="is not a regular file"),
              mapped_limited(tmp_path / "fifo.json")):
            pass
        with (pytest.raises(FileRefused, match="links outside"),
              mapped_limited(inside / "link.json", inside)):
            pass
    finally:
        outside.unlink()


def test_a_file_truncated_while_mapped_costs_its_worker_only(tmp_path: Path):
    """SIGBUS ends the worker that read past the new end; parallel_map runs that file again
    alone, and it is read as it now is (empty); the other file is not touched."""
    import parallel_tasks

    from aorta_core import parallel_map

    for name in ("whole.json", "cut.json"):
        (tmp_path / name).write_bytes(b"x" * (1 << 20) + b"!")
    items = [str(tmp_path / "whole.json"), str(tmp_path / "cut.json")]
    whole, cut = parallel_map(parallel_tasks.last_byte, items, workers=2)
    assert whole.value == ((1 << 20) + 1, ord("!")) and cut.value == (0, None)
    assert (tmp_path / "cut.json.attempts").read_text().count("attempt") == 2  # one died
