"""The core's Hydra tree is the package ``aorta_core.conf`` wherever aorta runs from.

The wheel ships the top-level ``conf/`` folder as ``aorta_core/conf``. A source checkout (an
editable install, or any install run from the repository, whose ``aorta_core`` folder then comes
first on ``sys.path``) has no ``aorta_core/conf``: there the same package is made from the
top-level folder, so ``pkg://aorta_core.conf`` means the same tree in every case.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PACKAGE = "aorta_core.conf"


def register() -> None:
    here = Path(__file__).resolve().parent
    tree = here.parent / "conf"
    if PACKAGE in sys.modules or (here / "conf").is_dir() or not (tree / "__init__.py").is_file():
        return
    spec = importlib.util.spec_from_file_location(
        PACKAGE, tree / "__init__.py", submodule_search_locations=[str(tree)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    sys.modules["aorta_core"].conf = module  # as the import system does for a found submodule
