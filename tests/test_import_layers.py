"""aorta_core in layers: collectors reach it through ``aorta_core.api`` alone (the built-in
collectors and the outside test collector import no other aorta_core module, anywhere in their
code), and each core module imports only from its own layer and those below (api < engine <
benchmark < reports < app). With tests/test_import_cycles.py this keeps the core easy to hold in
mind. CPU only: reads the source, imports nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import imports, modules_named

REPO = Path(__file__).resolve().parent.parent
COLLECTORS = sorted(p for p in [*REPO.glob("plugins/aorta_*/aorta_*"),
                                REPO / "tests" / "third_party_collector" / "aorta_rusage"]
                    if p.is_dir() and not p.name.endswith(".egg-info"))
#: aorta_core's layers, lowest first; each is a folder of aorta_core. A module imports only from
#: its own layer and those below (inside functions too). api: what collectors use; engine:
#: cells, trials, processes, records, the matrix and its files; benchmark: the built-in workload;
#: reports: what is read from the records afterwards; app: Hydra, the CLI and the sweep's driver.
LAYERS = ["api", "engine", "benchmark", "reports", "app"]
#: The public modules at aorta_core's top, outside the layer folders, and the layer each stands in:
#: what workloads import (payload), the pytest plugin for plugin authors (testing), the payload
#: programs the configs name (workloads), ``python -m aorta_core`` and the Hydra tree. A new module
#: at the top fails here until it is given its layer (or moved into a layer's folder).
TOP_LEVEL = {"payload": "engine", "workloads": "engine", "testing": "app", "__main__": "app",
             "conf": "app"}
ORDER = LAYERS


def _aorta_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every aorta_core module ``path`` may reach, inside functions too
    (``from aorta_core import payload`` reaches ``aorta_core.payload``)."""
    return [(line, reached) for line, module, names in imports(path)
            for reached in modules_named(module, names) if reached.split(".")[0] == "aorta_core"]


@pytest.mark.parametrize("package", COLLECTORS, ids=lambda p: p.name)
def test_a_collector_imports_aorta_core_api_only(package: Path):
    wrong = [f"{path.relative_to(REPO)}:{line}: {module}"
             for path in sorted(package.rglob("*.py"))
             for line, module, names in imports(path) if module.split(".")[0] == "aorta_core"
             and module != "aorta_core.api" and (module, names) != ("aorta_core", ["api"])]
    assert not wrong, "import these names from aorta_core.api instead:\n" + "\n".join(wrong)


def _layer(module: str) -> str | None:
    """The layer of ``aorta_core.x...``: its folder ``x``, or the layer a top-level public module
    stands in; ``None`` for the package root, which re-exports."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    return parts[0] if parts[0] in LAYERS else TOP_LEVEL.get(parts[0], "unplaced")


def test_every_core_module_imports_only_its_layer_and_those_below():
    core = REPO / "aorta_core"
    wrong = []
    for path in sorted(core.rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        layer = _layer(module)
        if layer is None:
            continue
        if layer == "unplaced":
            wrong.append(f"{module}: in no layer; move it into a layer's folder")
            continue
        for line, imported in _aorta_imports(path):
            target = _layer(imported)
            if target not in (None, "unplaced") and ORDER.index(target) > ORDER.index(layer):
                wrong.append(f"{module}:{line} ({layer}) imports {imported} ({target})")
    assert not wrong, "\n".join(wrong)


def test_the_layer_rule_catches_an_import_from_above():
    assert _layer("aorta_core.engine.trial") == "engine"
    assert _layer("aorta_core.reports.sweep") == "reports"
    timeline, trial = _layer("aorta_core.reports.timeline"), _layer("aorta_core.engine.trial")
    assert ORDER.index(timeline) > ORDER.index(trial)  # what trial.py imported until 2026-12
    assert _layer("aorta_core.new_module") == "unplaced"


def test_every_name_of_the_api_loads_and_is_documented():
    import aorta_core.api as api

    assert all(getattr(api, name) is not None for name in api.__all__)
    text = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    undocumented = sorted(n for n in api.__all__ if f"`{n}" not in text)
    assert not undocumented, f"in aorta_core.api but not in docs/plugins.md: {undocumented}"
