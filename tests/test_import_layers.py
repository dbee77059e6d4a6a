"""Collectors reach aorta through ``aorta_core.api`` alone, and that surface stands on its own:
the built-in collectors (and the outside test collector) import no other aorta_core module,
anywhere in their code, and the modules behind ``aorta_core.api`` import nothing of the sweep
engine, the Hydra app or the reports. CPU only: reads the source, imports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COLLECTORS = sorted(p for p in [*REPO.glob("plugins/aorta_*/aorta_*"),
                                REPO / "tests" / "third_party_collector" / "aorta_rusage"]
                    if p.is_dir() and not p.name.endswith(".egg-info"))
#: What ``aorta_core.api`` stands on (the lazily loaded names' modules included), and what
#: those may import of aorta_core in turn.
API = {"aorta_core", "aorta_core.api", "aorta_core.bom", "aorta_core.checks",
       "aorta_core.contracts", "aorta_core.executables", "aorta_core.files",
       "aorta_core.numbers", "aorta_core.parallel", "aorta_core.launch", "aorta_core.intervals",
       "aorta_core.install_hints", "aorta_core.payload", "aorta_core.reports.trace_events",
       "aorta_core.oneline", "aorta_core.hookspecs"}
#: Imported by ``aorta_core/__init__`` and ``aorta_core.payload`` only when a function runs.
LAZY_FROM_API = {"aorta_core.plugins"}


def _aorta_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every aorta_core import in ``path``, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] == "aorta_core"]
    return found


@pytest.mark.parametrize("package", COLLECTORS, ids=lambda p: p.name)
def test_a_collector_imports_aorta_core_api_only(package: Path):
    wrong = [f"{path.relative_to(REPO)}:{line}: {module}"
             for path in sorted(package.rglob("*.py"))
             for line, module in _aorta_imports(path) if module != "aorta_core.api"]
    assert not wrong, "import these names from aorta_core.api instead:\n" + "\n".join(wrong)


def test_the_api_surface_imports_nothing_of_the_engine_app_or_reports():
    wrong = []
    for module in sorted(API - {"aorta_core"}):
        path = REPO / (module.replace(".", "/") + ".py")
        wrong += [f"{module}:{line}: {imported}" for line, imported in _aorta_imports(path)
                  if imported not in API | LAZY_FROM_API]
    assert not wrong, "\n".join(wrong)


def test_every_name_of_the_api_loads_and_is_documented():
    import aorta_core.api as api

    assert all(getattr(api, name) is not None for name in api.__all__)
    text = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    undocumented = sorted(n for n in api.__all__ if f"`{n}" not in text)
    assert not undocumented, f"in aorta_core.api but not in docs/plugins.md: {undocumented}"
