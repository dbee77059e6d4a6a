"""What differs between two sweeps before any metric: the overrides set for a whole run, the
command each cell ran, its collectors and their options, the environment variables it set, and
the environment (host, GPUs, driver, Python, packages, collector versions). A cell is set against
the cell it is paired with (:mod:`.cell_pairs`).

Everything comes from what the run folders already hold: ``matrix.json`` (its ``environments``
and each cell's ``command`` and ``collectors``) and the first readable trial record of each cell
(``collectors.<name>.options`` and ``cell_env``), read with the usual readers. A value one side
cannot give (an edited matrix, a cell without a record) is left out rather than guessed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.engine.records import RECORD_NAME, BadRecord, load_record
from aorta_core.reports.cell_pairs import Pairing, label
from aorta_core.reports.html import inside

#: Per-cell values shown per aspect before the rest is counted.
MAX_CELL_LINES = 10

_PHRASES = {
    "override": "set the override {key} differently in every cell",
    "command": "ran different commands",
    "collectors": "used different collectors",
    "option": "set collector {name}'s option {key} differently",
    "env": "set the environment variable {key} differently",
    "host": "ran on different hosts",
    "GPU": "ran on different GPUs",
    "driver": "ran on different GPU drivers",
    "python": "ran different Python versions",
    "package": "ran different versions of {key}",
    "collector": "ran different versions of collector {key}",
}

#: How a missing value (``None``) reads, per aspect.
_NONE = {"override": "unset", "collectors": "none", "option": "unset", "env": "unset",
         "package": "not installed", "collector": "not installed"}


@dataclass
class Difference:
    """One way the two runs differ: ``aspect`` (a key of :data:`_PHRASES`), the option's or
    package's ``key``, the collector's ``name``, the values on each side (``None``: unset or not
    installed), the cell when it is one cell's, and whether it makes the runs not comparable."""

    aspect: str
    baseline: list[str | None]
    candidate: list[str | None]
    key: str = ""
    name: str = ""
    cell: str | None = None
    blocks: bool = False
    text: str = ""

    def describe(self, code: Callable[[str], str] = lambda s: f"`{s}`",
                 name: Callable[[str], str] = str) -> str:
        """One sentence: ``the two runs ran different commands: A `x`, B `y```; ``code``
        quotes a value, ``name`` a cell (Markdown escapes them)."""

        def values(side: list[str | None]) -> str:
            none = _NONE.get(self.aspect, "not recorded")
            return ", ".join(none if v is None else code(v) for v in side) or "none"

        subject = "the two runs" if self.cell is None else f"cell {name(self.cell)}"
        phrase = _PHRASES[self.aspect].format(key=self.key, name=self.name)
        tail = " (makes the runs not comparable)" if self.blocks else ""
        return (f"{subject} {phrase}: A {values(self.baseline)}, "
                f"B {values(self.candidate)}{tail}")


def _sorted(values: set[str | None]) -> list[str | None]:
    return sorted(values, key=lambda v: (v is None, v or ""))


def _aspect(aspect: str, a: dict[str, str | None], b: dict[str, str | None], key: str = "",
            name: str = "") -> list[Difference]:
    """The differences of one per-cell value (``a``/``b``: cell -> value): one line for the
    runs when each has one value, else one per matched cell that changed, else the two sets.
    Where cells matched and none changed, values only unmatched cells hold are no difference of
    what was compared (the pairing names those cells)."""
    sa, sb = set(a.values()), set(b.values())
    matched = [c for c in a if c in b]
    changed = [c for c in matched if a[c] != b[c]]
    if not changed and (sa == sb or matched):
        return []
    if len(sa) == 1 and len(sb) == 1:
        return [Difference(aspect, _sorted(sa), _sorted(sb), key, name)]
    if changed:
        return [Difference(aspect, [a[c]], [b[c]], key, name, cell=c) for c in changed]
    return [Difference(aspect, _sorted(sa), _sorted(sb), key, name)]


def _command(cell: dict[str, Any]) -> str | None:
    argv = cell.get("command")
    if isinstance(argv, list) and argv and all(isinstance(x, str) for x in argv):
        return shlex.join(argv)
    return None


def _flat(options: Any, prefix: str = "") -> dict[str, str]:
    """Nested options as ``a.b`` -> JSON text of the value."""
    if isinstance(options, dict) and options:
        out: dict[str, str] = {}
        for k, v in options.items():
            out |= _flat(v, f"{prefix}{k}.")
        return out
    return {prefix.removesuffix("."): msgspec.json.encode(options).decode()} if prefix else {}


def first_records(output: Path, matrix: dict[str, Any]) -> dict[str, Any]:
    """Each cell's first readable trial record (a cell without one is left out)."""
    found = {}
    for cell in matrix.get("cells") or []:
        folder = cell.get("dir") if isinstance(cell.get("dir"), str) else None
        if folder is None or not inside(folder):
            continue
        try:
            trials = sorted(p for p in (output / folder).iterdir() if p.name.startswith("trial_"))
        except OSError:
            continue
        for trial in trials:
            try:
                found[cell["cell"]] = load_record(trial / RECORD_NAME, cell["cell"])
                break
            except (FileNotFoundError, NotADirectoryError, BadRecord):
                continue
    return found


def _by_pair(cells: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """Each cell's value under its pair's name (:func:`.cell_pairs.label`), an unpaired one's
    under its own: only paired cells share a key with the other run."""
    return {names.get(n, n): v for n, v in cells.items()}


def _cell_differences(a: tuple[Path, dict[str, Any]], b: tuple[Path, dict[str, Any]],
                      pairing: Pairing) -> list[Difference]:
    (a_out, a_matrix), (b_out, b_matrix) = a, b
    a_names = {p: label(p, q) for p, q in pairing.pairs}
    b_names = {q: label(p, q) for p, q in pairing.pairs}
    a_cells = _by_pair({c["cell"]: c for c in a_matrix.get("cells") or []}, a_names)
    b_cells = _by_pair({c["cell"]: c for c in b_matrix.get("cells") or []}, b_names)

    def per_cell(cells: dict[str, dict], get: Callable[[dict], str | None]
                 ) -> dict[str, str | None]:
        return {n: v for n, c in cells.items() if (v := get(c)) is not None}

    out = _aspect("command", per_cell(a_cells, _command), per_cell(b_cells, _command))
    out += _aspect("collectors", {n: ", ".join(c.get("collectors") or []) or None
                                  for n, c in a_cells.items()},
                   {n: ", ".join(c.get("collectors") or []) or None
                    for n, c in b_cells.items()})
    a_rec = _by_pair(first_records(a_out, a_matrix), a_names)
    b_rec = _by_pair(first_records(b_out, b_matrix), b_names)
    a_opts = {c: {n: _flat(r.options) for n, r in rec.collectors.items()}
              for c, rec in a_rec.items()}
    b_opts = {c: {n: _flat(r.options) for n, r in rec.collectors.items()}
              for c, rec in b_rec.items()}
    collectors = sorted({n for side in (a_opts, b_opts) for o in side.values() for n in o})
    for name in collectors:
        a_used = {c: o[name] for c, o in a_opts.items() if name in o}
        b_used = {c: o[name] for c, o in b_opts.items() if name in o}
        if not a_used or not b_used:  # one side did not use it: "collectors" says so
            continue
        keys = sorted({k for side in (a_used, b_used) for o in side.values() for k in o})
        for key in keys:
            out += _aspect("option", {c: o.get(key) for c, o in a_used.items()},
                           {c: o.get(key) for c, o in b_used.items()}, key, name)
    env_keys = sorted({k for side in (a_rec, b_rec) for r in side.values() for k in r.cell_env})
    for key in env_keys:
        out += _aspect("env", {c: r.cell_env.get(key) for c, r in a_rec.items()},
                       {c: r.cell_env.get(key) for c, r in b_rec.items()}, key)
    return out


def _environment(matrix: dict[str, Any], used: set[str]) -> dict[tuple[str, str], set]:
    """(aspect, key) -> the run's values over its environments."""
    out: dict[tuple[str, str], set] = {}
    for env in matrix.get("environments") or []:
        if not isinstance(env, dict):
            continue
        gpus = [g for g in env.get("gpus") or [] if isinstance(g, dict)]
        values: dict[tuple[str, str], Any] = {
            ("host", ""): env.get("host"),
            ("GPU", ""): ", ".join(sorted(str(g.get("name")) for g in gpus)) or "none",
            ("driver", ""): ", ".join(sorted({str(g.get("driver")) for g in gpus})) or "none",
            ("python", ""): env.get("python")}
        packages = env.get("packages") if isinstance(env.get("packages"), dict) else {}
        values |= {("package", p): v for p, v in packages.items()}
        versions = env.get("collectors") if isinstance(env.get("collectors"), dict) else {}
        values |= {("collector", n): versions.get(n) for n in used}
        for k, v in values.items():
            out.setdefault(k, set()).add(None if v is None else str(v))
    return out


def _order(d: Difference) -> int:
    return list(_PHRASES).index(d.aspect)


def differences(a: tuple[Path, dict[str, Any]], b: tuple[Path, dict[str, Any]],
                used: set[str], blocking: set[str], pairing: Pairing) -> list[Difference]:
    """Every difference between run ``a`` and run ``b`` (each: output folder and its
    matrix), the overrides of whole runs and the per-cell ones first; ``used``: the collectors
    either run's cells use (whose versions count), ``blocking``: the environment keys that make
    them not comparable, ``pairing``: which cell is set against which."""
    out = [Difference("override", [r.baseline], [r.candidate], r.key)
           for r in pairing.run_level]
    out += _cell_differences(a, b, pairing)
    ea, eb = _environment(a[1], used), _environment(b[1], used)
    for aspect, key in sorted(ea.keys() | eb.keys(), key=lambda k: (list(_PHRASES).index(k[0]),
                                                                      k[1])):
        va, vb = ea.get((aspect, key), set()), eb.get((aspect, key), set())
        if va != vb:
            label = {"package": key, "collector": f"collector {key}"}.get(aspect, aspect)
            out.append(Difference(aspect, _sorted(va), _sorted(vb), key,
                                  blocks=label in blocking))
    out.sort(key=_order)
    for d in out:
        d.text = d.describe()
    return out
