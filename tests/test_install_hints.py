"""Install hints are commands that work: aorta's distributions are on no package index, so a hint
names the source each was installed from (the checkout folder or the wheel), through the real CLI
and a real pip."""

from __future__ import annotations

import shlex
import subprocess
import venv
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY_GUESS = " (in the aorta repository)"


def test_torchprof_names_a_working_install_command_for_a_python_that_lacks_it(tmp_path: Path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a workload interpreter without aorta
    python = str(bare / "bin" / "python")
    (tmp_path / "train.py").write_text("print('trained')\n")
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=torchprof", f"output={out}", "--",
                      python, "train.py"], cwd=tmp_path, env={"AORTA_LOAD_PLUGINS": "torchprof"})
    assert done.returncode == 1, done.stderr
    (rec,) = records(out)
    assert rec["verdict"] == "error" and "cannot import aorta_torchprof" in rec["error"]
    assert rec["error"].startswith("torchprof: ") and "torchprof: torchprof:" not in rec["error"]
    hint = rec["error"].split("into that environment (", 1)[1].split(") or use", 1)[0]
    command = shlex.split(hint.removesuffix(REPOSITORY_GUESS))
    assert command[:4] == [python, "-m", "pip", "install"] and "pip install aorta-" not in hint

    # The same command, for an interpreter with pip whose dependencies come from this Python.
    target = tmp_path / "target"
    venv.create(target, system_site_packages=True, with_pip=True)
    command[0] = str(target / "bin" / "python")
    _skip_without_an_index(command[0], tmp_path)
    installed = subprocess.run([*command, "-q"], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    probe = "import aorta_torchprof.runner, sys; print(sys.prefix)"
    ran = subprocess.run([command[0], "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60)
    assert ran.stdout.strip() == str(target), ran.stderr
    listed = subprocess.run([command[0], "-m", "pip", "list", "--local", "--format=freeze"],
                            capture_output=True, text=True, timeout=120).stdout
    assert {"aorta-core", "aorta-torchprof"} <= {line.split("==")[0] for line in
                                                 listed.splitlines()}


def test_no_hint_names_a_distribution_that_no_index_has():
    """``pip install aorta-<x>`` cannot work; an extra of an installed aorta-core can."""
    sources = [*ROOT.glob("aorta_core/**/*.py"), *ROOT.glob("plugins/*/aorta_*/**/*.py")]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "pip install aorta-" not in text.replace("pip install aorta-core[", ""), path


def _skip_without_an_index(python: str, tmp_path: Path) -> None:
    """pip builds the hint's checkouts in isolation: setuptools must come from a package index
    (a GPU machine without one runs everything else of this test)."""
    probe = subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps", "--retries", "0",
                            "--timeout", "10", "-d", str(tmp_path / "probe"), "setuptools"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("needs a package index for pip's build isolation: none is reachable here")
