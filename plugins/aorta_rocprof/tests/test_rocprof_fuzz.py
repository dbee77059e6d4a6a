"""Issue 13 for rocprofv3 CSVs: malformed CSVs and real ones mutated (cells set to huge,
non-finite or non-numeric text, columns renamed or dropped, damaged or truncated bytes), FIFOs,
links out, a header followed by a GiB of zeros and a folder name that is not UTF-8 cost metrics
and warnings only; the contract is in tests/fuzz_helpers.py."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from aorta_rocprof import plugin
from fuzz_helpers import (
    FUZZ,
    HOSTILE_NUMBERS,
    check_bom_is_ignored,
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


def test_a_leading_bom_changes_no_metric(tmp_path: Path) -> None:
    """Each committed CSV (stats, kernel traces of three layouts, memory copies, RCCL API) with
    a UTF-8 BOM before its header."""
    for fixture in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        check_bom_is_ignored("rocprof", fixture, tmp_path)


def _garbled(fixture: Path, tmp: Path, keep: int) -> Path:
    """The copy and RCCL API traces of ``fixture`` with the start time of every row after the
    first ``keep`` unreadable."""
    folder = shutil.copytree(fixture, tmp / f"garbled_{keep}")
    for path in folder.glob("*.csv"):
        rows = _table(path)
        start = rows[0].index("Start_Timestamp")
        for r in rows[1 + keep:]:
            r[start] = "garbled"
        path.write_bytes(_csv(rows))
    return folder


def test_no_usable_copy_row_is_no_copy_metric(tmp_path: Path) -> None:
    """A copy trace whose rows all lack a readable span gives no rocprof_memcpy_* (0 copies in
    0 ms would read as measured) and the RCCL API trace no rocprof_rccl_api_ms, each with a
    warning; one usable row is counted, the rest dropped with a warning."""
    fixture = FIXTURES / "v3_copy_rccl"
    for keep, expected in ((0, {}), (1, {"rocprof_memcpy_count": 1})):
        done = subprocess.run([sys.executable, "-m", "aorta_core", "parse", "rocprof",
                               str(_garbled(fixture, tmp_path, keep))],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        metrics = json.loads(done.stdout)
        found = {k: v for k, v in metrics.items() if k.startswith("rocprof_memcpy_count")}
        assert found == expected
        assert ("rocprof_memcpy_ms" in metrics) == bool(keep)
        assert ("rocprof_rccl_api_ms" in metrics) == bool(keep)
        stderr = " ".join(done.stderr.split())
        for trace in ("memory copy trace", "RCCL API trace"):
            assert "row(s) with a missing, unreadable or negative span" in stderr
            assert (f"no usable row in the {trace}; its metrics are omitted" in stderr) != bool(
                keep)
