"""The imports of a Python file as written, read from its source (nothing is imported): the one
reader of tests/test_import_cycles.py and tests/test_import_layers.py."""

from __future__ import annotations

import ast
from pathlib import Path


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import in ``path``, inside functions too:
    ``from m import a, b`` is ``(n, "m", ["a", "b"])``, ``import m`` is ``(n, "m", [])``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
    return found


def modules_named(module: str, names: list[str]) -> list[str]:
    """What an import may reach: the module, and ``module.name`` for each name (a submodule
    when ``from package import submodule``)."""
    return [module, *(f"{module}.{name}" for name in names)]
