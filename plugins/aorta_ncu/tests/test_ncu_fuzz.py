"""Issue 13's contract for ncu's artifacts (issue 23): real ``raw.csv`` and ``console.txt`` from
the H200 mutated (cells set to huge, non-finite or non-numeric text, columns renamed or dropped,
damaged or truncated bytes), FIFOs, links to /dev/zero or out of the folder, a page over the
read limit and blank lines cost metrics and warnings only; the contract is in
tests/fuzz_helpers.py. Needs no GPU: the fixtures are files.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from pathlib import Path

from aorta_ncu import plugin
from aorta_ncu.collect import CONSOLE, RAW
from fuzz_helpers import (
    FUZZ,
    HOSTILE_NUMBERS,
    byte_mutations,
    check_bom_is_ignored,
    edit_columns,
    parse_checked,
    parse_over_limit,
    sparse,
)
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures" / "h200"
PAGES = sorted(FIXTURES.glob("*.raw.csv"))
CONSOLES = sorted(FIXTURES.glob("*.console"))
#: The columns the parser binds by name (a rename to one of them makes a column count).
BOUND = ["ID", "Kernel Name", "gpu__time_duration.sum",
         "sm__throughput.avg.pct_of_peak_sustained_elapsed",
         "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]
CELLS = st.one_of(
    st.sampled_from([*HOSTILE_NUMBERS, "inf", "-inf", "nan", "n/a", "", "1,234,567", " 12", "%",
                     "ns", "second", "a\nb", '"']),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)


def parse(folder: Path) -> tuple[dict, list[str]]:
    metrics, warned = parse_checked(
        lambda f: plugin.parse_metrics(artifact_dir=f, options=None), folder, "ncu_")
    assert all(w.startswith("ncu: ") for w in warned), warned
    return metrics, warned


def folder_of(tmp: Path, page: bytes | None = None, console: bytes | None = None) -> Path:
    folder = tmp / "ncu"
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in ((RAW, page), (CONSOLE, console)):
        if data is not None:
            (folder / name).write_bytes(data)
    return folder


def _table(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _edit(rows: list[list[str]], edits: list[tuple[str, int, str, bool]]) -> bytes:
    """The raw page with ``edits`` (its units row counts as a header row)."""
    rows = edit_columns(rows, edits, head=2)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


def page_edits(path: Path) -> st.SearchStrategy[bytes]:
    rows = _table(path)
    edit = st.tuples(st.sampled_from(["cell", "cell", "rename", "drop"]),
                     st.integers(0, len(rows[0]) - 1), CELLS | st.sampled_from(BOUND),
                     st.booleans())
    return st.lists(edit, min_size=1, max_size=3).map(lambda e: _edit(rows, e))


def launches_in(path: Path) -> int:
    """Launch rows of a raw page, counted with the csv module: those under the units row."""
    return len([row for row in _table(path)[2:] if row])


@FUZZ
@given(page=st.one_of([page_edits(p) for p in PAGES]
                      + [byte_mutations(p.read_bytes()) for p in PAGES]))
def test_mutated_pages_keep_the_contract(page: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        parse(folder_of(Path(tmp), page=page))


@FUZZ
@given(console=st.one_of([byte_mutations(p.read_bytes()) for p in CONSOLES]))
def test_mutated_consoles_keep_the_contract(console: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        parse(folder_of(Path(tmp), console=console))


def test_blank_and_whitespace_lines_are_not_launches(tmp_path: Path) -> None:
    for seed in PAGES:
        lines = seed.read_bytes().splitlines(keepends=True)
        padded = b"\n".join([b"", *lines[:3], b"  \n", b"\t\r\n", *lines[3:], b"\n", b" \n\n"])
        metrics, _ = parse(folder_of(tmp_path / seed.name, page=padded))
        assert metrics["ncu_kernel_count"] == launches_in(seed), seed.name
        assert metrics == parse(folder_of(tmp_path / f"clean_{seed.name}",
                                          page=seed.read_bytes()))[0]
    assert launches_in(FIXTURES / "mm_basic.raw.csv") == 14  # the capture's own count


def test_fifo_and_dev_zero_console_are_named_and_skipped(tmp_path: Path) -> None:
    page = (FIXTURES / "mm_basic.raw.csv").read_bytes()
    expected, _ = parse(folder_of(tmp_path / "clean", page=page))
    for kind in ("fifo", "zero"):
        folder = folder_of(tmp_path / kind, page=page)
        if kind == "fifo":
            os.mkfifo(folder / CONSOLE)
        else:
            (folder / CONSOLE).symlink_to("/dev/zero")
        metrics, warned = parse(folder)
        assert metrics == expected
        assert f"ncu: {folder / CONSOLE} is not a regular file; ncu's reasons in it are not " \
               "read" in warned


def test_fifo_device_and_link_out_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.csv"
    shutil.copy(FIXTURES / "mm_basic.raw.csv", outside)
    cases = {"fifo": "is not a regular file", "zero": "is not a regular file",
             "out": f"links outside {tmp_path / 'out' / 'ncu'}"}
    for kind, reason in cases.items():
        folder = folder_of(tmp_path / kind)
        if kind == "fifo":
            os.mkfifo(folder / RAW)
        else:
            (folder / RAW).symlink_to("/dev/zero" if kind == "zero" else outside)
        metrics, warned = parse(folder)
        assert metrics == {}
        assert f"ncu: {folder / RAW} {reason}; its metrics are omitted" in warned


def test_a_link_inside_the_folder_is_read(tmp_path: Path) -> None:
    folder = folder_of(tmp_path)
    shutil.copy(FIXTURES / "mm_basic.raw.csv", folder / "report.csv")
    (folder / RAW).symlink_to("report.csv")
    assert parse(folder)[0]["ncu_kernel_count"] == launches_in(FIXTURES / "mm_basic.raw.csv")


def test_read_limit_mb_bounds_both_files(tmp_path: Path, monkeypatch) -> None:
    header = b"".join((FIXTURES / "mm_basic.raw.csv").read_bytes().splitlines(True)[:2])
    folder = folder_of(tmp_path)
    sparse(folder / RAW, header, gib=1)
    sparse(folder / CONSOLE, b"==PROF== Connected\n", gib=1)
    warned = parse_over_limit(parse, folder, {}, monkeypatch)
    for name in (RAW, CONSOLE):
        assert any(w.startswith(f"ncu: {folder / name} is 1024.0 MiB, over the 4 MiB read limit")
                   for w in warned), warned


def test_folder_name_that_is_not_utf8(tmp_path: Path) -> None:
    folder = tmp_path / os.fsdecode(b"run\xff") / "ncu"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "mm_basic.raw.csv", folder / RAW)
    assert parse(folder)[0] == parse(folder_of(tmp_path, page=(FIXTURES / "mm_basic.raw.csv")
                                               .read_bytes()))[0]


def test_a_leading_bom_changes_no_metric(tmp_path: Path) -> None:
    """Committed raw pages with their console output, each with a UTF-8 BOM before its text
    (the console's reasons are warnings: the same ones must come out)."""
    for stem in ("mm_basic", "mm_app"):
        folder = tmp_path / stem / "ncu"
        folder.mkdir(parents=True)
        shutil.copy(FIXTURES / f"{stem}.raw.csv", folder / RAW)
        shutil.copy(FIXTURES / f"{stem}.console", folder / CONSOLE)
        check_bom_is_ignored("ncu", folder, tmp_path / stem)
