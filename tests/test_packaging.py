"""The wheel ships every package of the tree, the Hydra tree included as ``aorta_core.conf``.

setuptools finds the packages (pyproject.toml), so a folder of aorta_core without an
``__init__.py`` would silently be left out of the wheel: these tests keep every folder a package.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "aorta_core"


def _folders(top: Path) -> list[Path]:
    return [top, *(d for d in top.rglob("*") if d.is_dir() and d.name != "__pycache__")]


def test_packages_are_found_not_listed():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in setuptools
    assert setuptools["packages"]["find"] == {"include": ["aorta_core*"]}


def test_every_aorta_core_folder_is_a_package():
    for folder in _folders(PACKAGE):
        assert (folder / "__init__.py").is_file(), f"{folder} needs an __init__.py"


def test_the_conf_tree_is_aorta_core_conf():
    import aorta_core.conf

    assert Path(aorta_core.conf.__file__).resolve().parent == PACKAGE / "conf"
