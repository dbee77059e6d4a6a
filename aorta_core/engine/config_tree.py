"""Why aorta's Hydra tree (``conf/``, installed as ``aorta_core.conf``) cannot be found, in one
line that says what to do: Hydra's own "Primary config module ... not found" names no cause."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def config_tree_missing() -> str | None:
    """None when ``aorta_core.conf`` is a package aorta can read. Else why: the ``aorta_core``
    imported is a checkout's folder (the working folder comes first on ``sys.path``), whose tree
    lies beside it and reaches ``aorta_core.conf`` only through an install; or a folder
    ``aorta_core/conf`` an older checkout left (its caches, no ``__init__.py``) hides the tree."""
    import aorta_core

    where = Path(aorta_core.__file__).parent
    spec = find_spec("aorta_core.conf")
    if spec is not None and spec.origin is not None:
        return None
    if spec is not None:  # a namespace package: a folder without __init__.py
        left = next(iter(spec.submodule_search_locations or ()), str(where / "conf"))
        return (f"{left} hides aorta's config tree (aorta_core.conf): a folder without "
                f"__init__.py, left by an older aorta; remove it: rm -r '{left}'")
    return (f"aorta_core is imported from {where}, which holds no config tree "
            "(aorta_core.conf): a checkout of aorta there shadows the installed package; run "
            f"from another folder, or install the checkout: pip install -e {where.parent}")
