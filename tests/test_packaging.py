"""The wheel ships every package of the tree, the Hydra tree ``conf/`` included as
``aorta_core.conf`` (setup.py's ``package_dir`` mapping).

setup.py finds the packages, so a folder of aorta_core or conf without an ``__init__.py`` would
silently be left out of the wheel: these tests keep every folder a package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.util import find_spec
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "aorta_core"
CONF = ROOT / "conf"


def _folders(top: Path) -> list[Path]:
    """Folders that hold source: one left with only ``__pycache__`` (a module moved away) is not."""
    return [top, *(d for d in top.rglob("*") if d.is_dir() and _holds_source(d))]


def _holds_source(folder: Path) -> bool:
    return "__pycache__" not in folder.parts and any(
        f.is_file() and "__pycache__" not in f.parts for f in folder.rglob("*")
    )


def test_packages_are_found_not_listed_and_conf_is_mapped():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in setuptools and "package-dir" not in setuptools  # setup.py's
    setup_py = (ROOT / "setup.py").read_text()
    assert 'package_dir={"aorta_core.conf": "conf"}' in setup_py
    assert "find_packages" in setup_py
    assert not (PACKAGE / "conf").exists()  # one tree, no copy


def test_every_aorta_core_and_conf_folder_is_a_package():
    for folder in [*_folders(PACKAGE), *_folders(CONF)]:
        assert (folder / "__init__.py").is_file(), f"{folder} needs an __init__.py"


def test_the_conf_tree_is_aorta_core_conf():
    import aorta_core.conf

    assert Path(aorta_core.conf.__file__).resolve().parent == CONF


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


CONFIG_TREES = [CONF, *ROOT.glob("plugins/aorta_*/aorta_*/conf")]


def test_configs_run_modules_of_installed_packages_not_files_of_the_checkout():
    """A config that names a script of the checkout works only from the checkout (a wheel install
    failed every cell of ``sweep=grid`` so); modules after ``-m`` are found like any import."""
    modules = []
    for tree in CONFIG_TREES:
        for path in tree.rglob("*.yaml"):
            strings = _strings(yaml.safe_load(path.read_text(encoding="utf-8")))
            for text in strings:
                assert not text.endswith(".py") and "examples/" not in text, (path, text)
            modules += [after for before, after in pairwise(strings) if before == "-m"]
    assert "aorta_core.workloads.tiny" in modules
    for module in modules:
        spec = find_spec(module)
        assert spec is not None and spec.origin, module
        assert not Path(spec.origin).resolve().is_relative_to(ROOT / "examples"), module


def _setuptools_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("setuptools").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return 0


@pytest.mark.skipif(_setuptools_major() < 77, reason="needs setuptools>=77 to build without "
                    "isolation (license = \"MIT\", PEP 639): pip install -e '.[test]'")
def test_the_built_wheel_holds_every_module_and_config_of_the_checkout(tmp_path: Path):
    """Built as users build it (from a copy: setuptools adds whatever an earlier build left in
    build/lib), the wheel holds exactly the package's files, conf/ as aorta_core/conf/."""
    src = tmp_path / "src"
    for folder in (PACKAGE, CONF):
        shutil.copytree(folder, src / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "wheels"), str(src)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheels").glob("aorta_core-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.startswith("aorta_core/")}
    on_disk = {*(p.relative_to(ROOT).as_posix() for p in _sources(PACKAGE)),
               *(f"aorta_core/{p.relative_to(ROOT).as_posix()}" for p in _sources(CONF))}
    assert shipped == on_disk
    assert {"aorta_core/workloads/tiny.py", "aorta_core/conf/workload/tiny.yaml"} <= shipped


def _sources(top: Path) -> list[Path]:
    return [p for p in top.rglob("*")
            if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts]


def _shadowing_checkout(tmp_path: Path) -> Path:
    """A folder holding a copy of aorta_core/ (the source alone, as a checkout has it beside
    conf/): run from there, it is the aorta_core Python imports."""
    shutil.copytree(PACKAGE, tmp_path / "aorta_core",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return tmp_path


def _aorta(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m`` with this Python's import path (site-packages and what its ``.pth`` files
    added) but no ``.pth`` file run (``-S``): an editable install's finder would otherwise map
    aorta_core.conf to this checkout's conf/, wherever aorta_core came from, as a wheel install
    does not."""
    path = [p for p in sys.path if p and Path(p).resolve() != ROOT]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-S", "-m", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_checkout_that_shadows_the_install_is_one_line(tmp_path: Path):
    """From a folder whose aorta_core/ holds no config tree, the sweep and the benchmark name the
    folder and the way out (Hydra alone says "Primary config module ... not found")."""
    where = _shadowing_checkout(tmp_path)
    for args, prefix in ((["aorta_core", "sweep=repeat", "--", "true"], "aorta: error: "),
                         (["aorta_core.benchmark"], "aorta benchmark: ")):
        done = _aorta(where, *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"{prefix}aorta_core is imported from "
                                      f"{where / 'aorta_core'}, which holds no config tree"), \
            done.stderr
        assert len(done.stderr.splitlines()) == 1 and "pip install -e" in done.stderr


def test_a_conf_folder_an_older_checkout_left_is_named_for_removal(tmp_path: Path):
    """Moving conf/ out of aorta_core/ (git pull) leaves aorta_core/conf/ with its caches: a
    namespace package that hides the installed tree. One line names it and how to remove it."""
    where = _shadowing_checkout(tmp_path)
    left = where / "aorta_core" / "conf" / "workload" / "__pycache__"
    left.mkdir(parents=True)
    done = _aorta(where, "aorta_core", "sweep=repeat", "--", "true")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"aorta: error: {where / 'aorta_core' / 'conf'} hides aorta's config "
                           "tree (aorta_core.conf): a folder without __init__.py, left by an "
                           f"older aorta; remove it: rm -r '{where / 'aorta_core' / 'conf'}'\n")
