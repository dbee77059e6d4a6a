"""Any path works, through the real CLI: a working folder or ``output=`` with spaces, non-ASCII
letters and the characters of Hydra's override grammar (``, ( ) [ ] ' = \\ $ { }``) holds the
whole sweep (records and matrix.json in one folder, nothing written elsewhere); ``output=``
empty is a usage error.

Hardware: none (a one-line Python command per trial); CPU-only and GPU machines alike.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta

#: Folder names that Hydra's grammar would split, reject or interpolate if passed unquoted.
NAMES = [
    "a b/josé/x,(y)[z]'q=r\\s$HOME{}",
    "${HOME}/${oc.env:HOME}/\\${x}",
    "it's [1,2]=(3)",
    "ends with a backslash\\",
    "日本 ✓",
]
COMMAND = ["--", sys.executable, "-c", "print('hello')"]


def _one_sweep_in(output: Path) -> None:
    """The trial's record and the matrix are both in ``output``."""
    (rec,) = records(output)
    assert rec["verdict"] == "pass" and rec["cell"] == "default"
    matrix = json.loads((output / "matrix.json").read_text(encoding="utf-8"))
    assert [c["cell"] for c in matrix["cells"]] == ["default"]
    assert matrix["trials"]["total"] == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_working_folder_with_any_name_runs_the_default_output(tmp_path: Path, name: str):
    cwd = tmp_path / name
    cwd.mkdir(parents=True)
    done = run_aorta(["sweep=repeat", "trials=1", *COMMAND], cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in cwd.iterdir()] == ["aorta_runs"]
    (output,) = (cwd / "aorta_runs").iterdir()
    _one_sweep_in(output)
    folders = {cwd, *(p for p in cwd.parents if tmp_path in p.parents)}
    elsewhere = [p for p in tmp_path.rglob("*") if p not in folders and cwd not in p.parents]
    assert elsewhere == []
    assert f"wrote {output / 'matrix.json'}" in done.stderr  # named as it is, not as markup


@pytest.mark.parametrize("name", NAMES)
def test_output_with_any_name_holds_the_whole_sweep(tmp_path: Path, name: str):
    cwd, output = tmp_path / "cwd", tmp_path / name / "out"
    cwd.mkdir()
    done = run_aorta(["sweep=repeat", "trials=1", f"output={output}", *COMMAND], cwd=cwd)
    assert done.returncode == 0, done.stderr
    _one_sweep_in(output)
    assert list(cwd.iterdir()) == []
    folders = {cwd, output, *(p for p in output.parents if tmp_path in p.parents)}
    elsewhere = [p for p in tmp_path.rglob("*") if p not in folders and output not in p.parents]
    assert elsewhere == []


def test_a_relative_output_with_grammar_characters_is_one_folder(tmp_path: Path):
    name = "runs, (b)=c"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "+cell=1,2", f"output={name}",
                      *COMMAND], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    matrix = json.loads((tmp_path / name / "matrix.json").read_text(encoding="utf-8"))
    assert sorted(c["cell"] for c in matrix["cells"]) == ["cell=1", "cell=2"]
    assert len(records(tmp_path / name)) == 2


def test_an_empty_output_is_a_usage_error_that_writes_nothing(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "trials=1", "output=", *COMMAND], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "aorta: error: output= is empty (an unset shell variable?); give the sweep's folder: "
        "output=<dir>, or leave output= out for aorta_runs/<timestamp>"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", NAMES[:2])
def test_a_config_dir_with_any_name_adds_its_recipes(tmp_path: Path, name: str):
    recipes = tmp_path / name / "sweep"
    recipes.mkdir(parents=True)
    (recipes / "mine.yaml").write_text(
        "# @package _global_\nrequires_command: true\ntrials: 1\n"
        "hydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      +cell: a,b\n", encoding="utf-8")
    out = tmp_path / "out"
    done = run_aorta(["--config-dir", str(tmp_path / name), "sweep=mine", f"output={out}",
                      *COMMAND], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["cell"] for r in records(out)) == ["cell=a", "cell=b"]
