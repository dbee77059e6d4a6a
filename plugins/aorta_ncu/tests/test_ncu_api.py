"""ncu proves the plugin API: from aorta_core it imports only what plugins.md documents."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "aorta_ncu"
DOC = Path(__file__).resolve().parents[3] / "docs" / "plugins.md"


def core_imports() -> dict[str, set[str]]:
    """module of every ``from aorta_core... import`` in the package -> the names imported."""
    found: dict[str, set[str]] = {}
    for source in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("aorta_core") for a in node.names), source
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aorta_core"):
                found.setdefault(node.module, set()).update(a.name for a in node.names)
    return found


def test_only_documented_names_of_the_top_level_package():
    imports = core_imports()
    assert set(imports) == {"aorta_core"}, "import from aorta_core itself, never its modules"
    text = DOC.read_text()
    undocumented = {n for n in imports["aorta_core"] if f"`{n}" not in text}
    assert not undocumented, f"used but not in docs/plugins.md: {sorted(undocumented)}"
    assert imports["aorta_core"] >= {"hookimpl", "find_executable", "SetupError"}
