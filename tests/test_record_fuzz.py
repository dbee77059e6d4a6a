"""Hostile trial records and cell files through ``aorta matrix``, ``aorta report sweep`` and
``aorta compare`` (issue 23): fields of another type, huge or non-finite numbers, 10,000-deep
nesting, NUL and non-UTF-8 bytes, a BOM, truncation, links, FIFOs. The contract: no traceback,
no hang, exit 0, 1 or 2, a record that cannot be used is one warning line naming it and is left
out, and the other records still make the matrix.

The loops call the public entry ``aorta_core.app.cli.main`` in this process (a subprocess each
would take minutes); the links and FIFOs, which could hang or fill the runner, go through the
real CLI in a subprocess. Needs no GPU: the payload is a Python one-liner.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_helpers import main_in_process, run_aorta
from fuzz_helpers import FUZZ, byte_mutations, json_mutations, time_limit
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_core.engine.records import CELL_FILE

#: Fewer examples than the parsers' fuzzing: each one builds a matrix, a report and a compare.
RECORD_FUZZ = settings(FUZZ, max_examples=int(os.environ.get("AORTA_FUZZ_EXAMPLES", 25)))
BOM = b"\xef\xbb\xbf"
STEP_MS = ("import json, os; json.dump({'step_ms': 10 + int(os.environ['AORTA_TRIAL'])}, "
           "open(os.environ['AORTA_METRICS_PATH'], 'w'))")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A real sweep: one cell, three passing trials reporting workload_step_ms."""
    root = tmp_path_factory.mktemp("records")
    out = root / "run"
    done = run_aorta(["sweep=repeat", "trials=3", f"output={out}", "--", sys.executable, "-c",
                      STEP_MS], cwd=root)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def run(sweep, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("AORTA_REPORT_PNG", "0")
    return shutil.copytree(sweep, tmp_path / "run", symlinks=True)


def _files(run: Path) -> tuple[Path, Path, Path]:
    first, second = sorted(run.glob("cells/*/trial_*/record.json"))[:2]
    return first, second, next(run.glob("cells/*/cell.json"))


def _check_tools(run: Path, bad: Path | None = None) -> None:
    """matrix, report sweep and compare over ``run`` keep the contract; ``bad``, if given, is
    named on one warning line and left out, and the matrix still holds the other trials."""
    with time_limit(60):
        status, _, err = main_in_process("matrix", str(run))
        assert status == 0, err
        matrix = json.loads((run / "matrix.json").read_bytes())
        if bad is not None and bad.name == CELL_FILE:  # a cell renamed: its records name another
            assert len([ln for ln in err.splitlines() if str(bad) in ln]) <= 1
        else:
            assert sum(c["trials"]["total"] for c in matrix["cells"]) >= 2
        if bad is not None and str(bad.relative_to(run)) in matrix["unreadable_records"]:
            lines = [ln for ln in err.splitlines() if str(bad) in ln]
            assert len(lines) == 1 and lines[0].startswith(f"aorta: warning: bad record {bad}")
        status, _, err = main_in_process("report", "sweep", str(run), "--no-png")
        assert status in (0, 1), err
        for extra in ([], ["--json"]):
            status, out, err = main_in_process("compare", str(run), str(run), *extra)
            assert status in (0, 1), err
        assert json.loads(out)["baseline"] == str(run)


@RECORD_FUZZ
@given(data=st.data())
def test_mutated_records_and_cell_files_keep_the_contract(run, data):
    first, second, cell = _files(run)
    target = data.draw(st.sampled_from([first, second, cell]), label="file")
    raw = target.read_bytes()
    target.write_bytes(data.draw(st.one_of(
        json_mutations(json.loads(raw)), byte_mutations(raw), st.just(BOM + raw),
        st.just(raw.replace(b'"pass"', b'"pa\x00ss"')),
        st.just(raw.replace(b'"default"', b'"def\xffault"')),
    ), label="content"))
    try:
        _check_tools(run, target)
    finally:
        target.write_bytes(raw)


def test_a_record_with_a_bom_is_read(run):
    first, _, _ = _files(run)
    first.write_bytes(BOM + first.read_bytes())
    status, _, err = main_in_process("matrix", str(run))
    assert status == 0 and "bad record" not in err
    assert json.loads((run / "matrix.json").read_bytes())["trials"]["pass"] == 3


def test_a_record_nested_too_deeply_is_one_bad_record(run):
    """msgspec raised RecursionError (a traceback) on 10,000-deep JSON in a free-form field."""
    first, _, _ = _files(run)
    doc = first.read_text()
    first.write_text(doc.replace('"environment": {', '"environment": {"deep": '
                                 + "[" * 10_000 + "]" * 10_000 + ",", 1))
    status, _, err = main_in_process("matrix", str(run))
    assert status == 0
    (line,) = [ln for ln in err.splitlines() if str(first) in ln]
    assert line.startswith(f"aorta: warning: bad record {first}: JSON nested too deeply")
    _check_tools(run, first)
    assert str(first.relative_to(run)) in json.loads((run / "matrix.json").read_bytes())[
        "unreadable_records"]


@pytest.mark.parametrize("edit", [{"collectors": 1.5}, {"cell": None}, {"axes": "x"},
                                  {"auto": "null"}, {"agree": [1]}])
def test_a_cell_file_of_another_shape_is_one_warning(run, edit):
    """Each edit crashed aorta matrix (perf.md, the summary table, the auto line) or made a
    matrix.json that compare refuses; now the cell is named after its folder, with one line."""
    _, _, cell = _files(run)
    cell.write_text(json.dumps({**json.loads(cell.read_text()), **edit}))
    status, _, err = main_in_process("matrix", str(run))
    assert status == 0
    (line,) = [ln for ln in err.splitlines() if str(cell) in ln]
    assert line.startswith(f"aorta: warning: bad cell file {cell}: ")
    assert line.endswith("the cell is named after its folder: run the sweep again to rewrite it")
    assert json.loads((run / "matrix.json").read_bytes())["trials"]["pass"] == 3
    _check_tools(run, cell)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "other-record", "folder", "empty"])
def test_records_that_are_not_files_are_named_and_left_out(run, kind):
    """A FIFO or /dev/zero would hang the CLI or fill its memory: those go through the real CLI
    in a subprocess first."""
    first, second, _ = _files(run)
    first.unlink()
    if kind == "fifo":
        os.mkfifo(first)
    elif kind == "dev-zero":
        first.symlink_to("/dev/zero")
    elif kind == "other-record":
        first.symlink_to(second)
    elif kind == "folder":
        first.mkdir()
    else:
        first.write_bytes(b"")
    if kind in ("fifo", "dev-zero"):
        done = run_aorta(["matrix", str(run)], cwd=run, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    _check_tools(run, first)
    matrix = json.loads((run / "matrix.json").read_bytes())
    assert matrix["trials"]["pass"] == 2
    assert str(first.relative_to(run)) in matrix["unreadable_records"]
