"""Issue 13 for rocprofv3 CSVs: malformed CSVs and real ones mutated (cells set to huge,
non-finite or non-numeric text, columns renamed or dropped, damaged or truncated bytes), FIFOs,
links out, a header followed by a GiB of zeros and a folder name that is not UTF-8 cost metrics
and warnings only; the contract is in tests/fuzz_helpers.py."""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from pathlib import Path

from aorta_rocprof import plugin
from fuzz_helpers import (
    FUZZ,
    HOSTILE_NUMBERS,
    check_hostile_files_skipped,
    damaged_files,
    edit_columns,
    parse_checked,
    parse_over_limit,
    sparse,
)
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = sorted(FIXTURES.rglob("*.csv"))
HEADERS = {
    "aorta_kernel_stats.csv": '"Name","Calls","TotalDurationNs","AverageNs"',
    "aorta_kernel_trace.csv": '"Kind","Kernel_Name","Start_Timestamp","End_Timestamp"',
    "results.csv": '"Index","KernelName","BeginNs","EndNs"',
    "aorta_memory_copy_trace.csv": '"Kind","Direction","Start_Timestamp","End_Timestamp","Size"',
    "aorta_rccl_api_trace.csv": '"Domain","Function","Start_Timestamp","End_Timestamp"',
}
#: The columns the parser binds by name (a rename to one of them makes a column count).
BOUND = ["Name", "Calls", "TotalDurationNs", "Kind", "Kernel_Name", "KernelName",
         "Start_Timestamp", "End_Timestamp", "BeginNs", "EndNs", "Size", "Bytes"]
CELLS = st.one_of(
    st.sampled_from([*HOSTILE_NUMBERS, "inf", "-inf", "nan", "", "1.5", "0x10", " 12", "abc",
                     "KERNEL_DISPATCH", "18446744073709551615", "a\nb", '"']),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)
row = st.lists(CELLS, min_size=0, max_size=6).map(",".join)


def parse(folder: Path) -> tuple[dict, list[str]]:
    return parse_checked(
        lambda f: plugin.parse_metrics(artifact_dir=f, options=None), folder, "rocprof_"
    )


def parse_file(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, name).write_bytes(data)
        parse(Path(tmp))


def _table(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


def _edit(rows: list[list[str]], edits: list[tuple[str, int, str, bool]]) -> bytes:
    return _csv(edit_columns(rows, edits))


def csv_mutations(path: Path) -> st.SearchStrategy[tuple[str, bytes]]:
    rows = _table(path)
    edit = st.tuples(
        st.sampled_from(["cell", "cell", "rename", "drop"]),
        st.integers(0, len(rows[0]) - 1),
        CELLS | st.sampled_from(BOUND),
        st.booleans(),
    )
    return st.lists(edit, min_size=1, max_size=3).map(lambda e: (path.name, _edit(rows, e)))


@FUZZ
@given(
    name=st.sampled_from(sorted(HEADERS)),
    keep_header=st.booleans(),
    rows=st.lists(row, max_size=8),
    tail=st.binary(max_size=16),
)
def test_malformed_csv_never_raises(name, keep_header, rows, tail):
    lines = ([HEADERS[name]] if keep_header else []) + rows
    parse_file(name, "\n".join(lines).encode("utf-8", "surrogatepass") + tail)


@FUZZ
@given(file=st.one_of([csv_mutations(p) for p in SEEDS] + [damaged_files(SEEDS)]))
def test_mutated_csvs_keep_the_contract(file: tuple[str, bytes]) -> None:
    parse_file(*file)


def test_hostile_numbers_keep_the_contract() -> None:
    for seed in SEEDS:
        rows = _table(seed)
        for col, name in enumerate(rows[0]):
            if name in BOUND:
                for text in HOSTILE_NUMBERS:
                    parse_file(seed.name, _edit(rows, [("cell", col, text, True)]))


def test_fifo_device_and_link_out_are_skipped(tmp_path: Path) -> None:
    folder = shutil.copytree(FIXTURES / "v3_copy_rccl", tmp_path / "rocprof")
    (folder / "host").mkdir()  # rocprofv3 without -o: <host>/<pid>_*.csv
    check_hostile_files_skipped(parse, folder, "_kernel_trace.csv", SEEDS[0])
    check_hostile_files_skipped(parse, folder, "_kernel_stats.csv",
                                FIXTURES / "legacy_stats" / "results.stats.csv", folder / "host")


def test_header_then_a_gib_of_zeros_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    folder = shutil.copytree(FIXTURES / "v3_copy_rccl", tmp_path / "rocprof")
    expected, _ = parse(folder)
    header = (FIXTURES / "v3_7x_trace" / "aorta_kernel_trace.csv").read_bytes().split(b"\n")[0]
    sparse(folder / "big_kernel_trace.csv", header + b"\n", gib=1)
    warned = parse_over_limit(parse, folder, expected, monkeypatch)
    assert any("big_kernel_trace.csv is 1024.0 MiB, over the 4 MiB read limit" in w
               for w in warned)


def test_folder_name_that_is_not_utf8(tmp_path: Path) -> None:
    """Linux gives the byte 0xff in a name as a surrogate-escaped str, which polars refuses."""
    for fixture in ("v3_7x_trace", "v3_stats_mi355x", "v3_copy_rccl"):
        folder = tmp_path / os.fsdecode(b"run\xff") / fixture
        shutil.copytree(FIXTURES / fixture, folder)
        expected, _ = parse(FIXTURES / fixture)
        assert expected and parse(folder)[0] == expected
