"""The wheel ships every package of the tree, the Hydra tree in conf/ as ``aorta_core.conf``."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages(folder: Path, name: str) -> set[str]:
    return {".".join([name, *d.relative_to(folder).parts])
            for d in [folder, *folder.rglob("*")] if (d / "__init__.py").is_file()}


def test_the_package_list_matches_the_folders():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"aorta_core": "aorta_core", "aorta_core.conf": "conf"}
    on_disk = _packages(ROOT / "aorta_core", "aorta_core") | _packages(ROOT / "conf",
                                                                       "aorta_core.conf")
    assert set(setuptools["packages"]) == on_disk


def test_every_conf_folder_is_a_package():
    for folder in [ROOT / "conf", *(d for d in (ROOT / "conf").rglob("*") if d.is_dir())]:
        if folder.name != "__pycache__":
            assert (folder / "__init__.py").is_file(), f"{folder} needs an __init__.py"


def test_the_conf_tree_is_aorta_core_conf_from_the_checkout():
    import aorta_core.conf

    assert Path(aorta_core.conf.__file__).resolve().parent in (ROOT / "conf",
                                                               ROOT / "aorta_core" / "conf")
