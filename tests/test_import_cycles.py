"""No two modules of aorta_core import each other, directly or around a loop, counting the
imports inside functions too (a lazy import hides a cycle from Python, not from a reader who
must hold both modules in mind). The package's own ``__init__`` re-exports and is left out.
CPU only: reads the source, imports nothing."""

from __future__ import annotations

from pathlib import Path

from import_graph import imports, modules_named

import aorta_core

ROOT = Path(aorta_core.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The aorta_core modules ``path`` imports, anywhere in it (``from m import name`` counts
    ``m.name`` when that is a module)."""
    return {n for _, module, names in imports(path) for n in modules_named(module, names)
            if n in known}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_the_cycle_finder_finds_a_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_module_of_aorta_core_imports_itself_around_a_loop():
    modules = _modules()
    graph = {name: _imports(path, modules) - {name, "aorta_core"}
             for name, path in modules.items() if name != "aorta_core"}
    assert len(graph) > 50
    assert _cycles(graph) == []
