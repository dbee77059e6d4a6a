"""``aorta compare`` over run folders whose matrix files are hostile (a FIFO, a link to
/dev/zero, JSON of the wrong shape, mutated JSON) or whose path reads as Rich markup or a glob:
one line naming the file and the fix, exit 2, never a hang or a traceback (issue 23, item 10)."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import main_in_process
from fuzz_helpers import FUZZ, byte_mutations, json_mutations, time_limit
from hypothesis import given
from hypothesis import strategies as st
from reports.conftest import STEP_MS
from reports.report_helpers import aorta

BOM = b"\xef\xbb\xbf"


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


def _one_error(status: int, err: str, path: Path) -> None:
    """Status 2 and one line: ``<path>/matrix.json is not a matrix.json ...; rebuild it``."""
    assert status == 2, err
    (line,) = err.splitlines()
    assert line.startswith(f"aorta: error: {path / 'matrix.json'} is not a matrix.json")
    assert line.endswith(f"rebuild it with aorta matrix {path}")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _text(text: str):
    return lambda path: path.write_text(text)


@pytest.mark.parametrize("make", [
    _fifo, _zero, Path.mkdir, _text("[]"), _text("null"), _text('{"cells": null}'),
    _text('{"cells": [{"cell": 3}]}'), _text('{"cells": [], "environments": [1]}'),
    _text('{"cells": [{"cell": "a", "trials": []}]}'), _text("[" * 100_000),
], ids=["fifo", "dev-zero", "folder", "list", "null", "no-cells", "number-cell", "number-env",
        "list-trials", "deep"])
def test_unusable_matrix_json_is_one_line(sweeps, tmp_path, make):
    """In a subprocess for the FIFO and the link to /dev/zero (a hang or a memory blow-up would
    take the test runner with it), in this process for the others; as candidate and baseline,
    with --json and --html."""
    bad = _copy(sweeps["fast"], tmp_path / "bad")
    (bad / "matrix.json").unlink()
    make(bad / "matrix.json")
    good, page = str(sweeps["fast"]), str(tmp_path / "c.html")
    if make in (_fifo, _zero):
        done = aorta("compare", good, str(bad), "--html", page, "--no-png", cwd=tmp_path,
                     check=False)
        _one_error(done.returncode, done.stderr, bad)
        return
    for args in ([good, str(bad)], [str(bad), good, "--json"],
                 [good, str(bad), "--html", page, "--no-png"]):
        with time_limit(30):
            _one_error(*main_in_process("compare", *args)[::2], bad)


def test_unusable_matrix_parquet_is_one_line(sweeps, tmp_path):
    bad = _copy(sweeps["fast"], tmp_path / "bad")
    (bad / "matrix.parquet").unlink()
    os.mkfifo(bad / "matrix.parquet")
    done = aorta("compare", str(sweeps["fast"]), str(bad), cwd=tmp_path, check=False)
    assert done.returncode == 2
    assert done.stderr == (f"aorta: error: {bad / 'matrix.parquet'} is not a matrix.parquet "
                           f"aorta can read (not a regular file); rebuild it with aorta matrix "
                           f"{bad}\n")


def test_output_path_that_reads_as_markup_or_a_glob(tmp_path):
    """A sweep into ``a[/x]:fire:[bold]b`` prints its paths as they are, and its matrix files
    are read back by ``aorta matrix``, ``aorta compare`` and report.html's trial spread (polars
    reads a path as a glob pattern)."""
    out = tmp_path / "a[/x]:fire:[bold]b[1]"
    done = aorta("sweep=repeat", "trials=2", f"output={out}", "--", "python3", "-c",
                 STEP_MS.format(base=10), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'matrix.json'}\n" in done.stderr and "aorta sweep\n" in done.stderr
    for args in (["matrix", str(out)], ["report", "sweep", str(out), "--no-png"]):
        again = aorta(*args, cwd=tmp_path)
        assert again.returncode == 0 and f"wrote {out / 'report.html'}\n" in again.stderr
        assert "could not be built" not in (out / "report.html").read_text()
    compared = aorta("compare", str(out), str(out), "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["rows"]
    assert {r["metric"] for r in rows} == {"wall_time_s", "workload_step_ms"}
    assert all(r["n_baseline"] == 2 for r in rows)


@pytest.fixture(scope="module")
def hostile_pair(sweeps, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare_fuzz")
    return _copy(sweeps["fast"], root / "base"), _copy(sweeps["slow"], root / "cand")


def _matrix(sweeps) -> tuple[dict, bytes]:
    data = (sweeps["slow"] / "matrix.json").read_bytes()
    return json.loads(data), data


@FUZZ
@given(data=st.data())
def test_mutated_matrix_json_never_tracebacks(sweeps, hostile_pair, tmp_path, data):
    """Each mutated matrix.json (fields of another type or hostile values anywhere, bytes
    flipped or cut, a BOM, a NUL) through compare, --json and --html: exit 0/1/2, and an exit 2
    is one line naming the file, or saying that no cell pairs (a mutated name or axis)."""
    doc, raw = _matrix(sweeps)
    content = data.draw(st.one_of(json_mutations(doc), byte_mutations(raw),
                                  st.just(BOM + raw), st.just(raw[:-1] + b"\x00")))
    base, cand = hostile_pair
    (cand / "matrix.json").write_bytes(content)
    extra = data.draw(st.sampled_from([[], ["--json"], ["--html", str(tmp_path / "c.html"),
                                                        "--no-png"]]))
    with time_limit(30):
        status, out, err = main_in_process("compare", str(base), str(cand), *extra)
    assert status in (0, 1, 2), err
    if status == 2:
        (line,) = err.splitlines()
        assert line.startswith((f"aorta: error: {cand / 'matrix.json'} is not a matrix.json",
                                f"aorta: error: no cell of {base} pairs with a cell of {cand}"))
    elif "--json" in extra:
        assert json.loads(out)["candidate"] == str(cand)


def test_values_near_the_float_limit(sweeps, tmp_path, monkeypatch):
    """Records edited to hold metrics near 1.8e308 (and a 70-bit int): the matrix takes them,
    and compare tests them (the U test reads ranks) with no interval where the bootstrap's
    differences overflow, instead of an OverflowError traceback."""
    monkeypatch.setenv("AORTA_REPORT_PNG", "0")
    huge = _copy(sweeps["fast"], tmp_path / "huge")
    paths = sorted(huge.glob("cells/*/trial_*/record.json"))
    for value, path in zip((1.7e308, -1.7e308, 1.6e308, -1.6e308, 1.5e308), paths,
                           strict=True):
        record = json.loads(path.read_text())
        record["metrics"]["workload_step_ms"] = value
        record["metrics"]["workload_big"] = 2**70
        path.write_text(json.dumps(record))
    assert main_in_process("matrix", str(huge))[0] == 0
    for args in ([str(sweeps["fast"]), str(huge)], [str(huge), str(sweeps["fast"])]):
        status, out, err = main_in_process("compare", *args, "--json")
        assert status == 0, err
        row = next(r for r in json.loads(out)["rows"] if r["metric"] == "workload_step_ms")
        assert 0 < row["p_value"] <= 1 and row["n_baseline"] == row["n_candidate"] == 5
        assert all(row[k] is None or math.isfinite(row[k]) for k in ("ci_low", "ci_high"))
