"""Which cell of run B ``aorta compare`` sets against which cell of run A.

A cell's name is made from its overrides, so an override given to a whole run (``+env.FOO=1``,
``collector.torchprof.record_shapes=true``, ``collector=rusage``) is part of every cell name of
that run, and pairing by name would pair nothing. Cells therefore pair by what they are: by name
when both runs have it, else by their axes (``matrix.json`` ``cells[*].axes``) without the
*run-level* keys, those whose value is one and the same in every cell of each run (or absent
from every cell of one) but differs between the runs. Such a key is a difference of the runs,
named before any metric, not part of a cell's identity.

``--pair A_CELL B_CELL`` pairs two cells by name before any other rule; ``--match KEY[,KEY]``
pairs the other cells on those axes alone, and refuses keys that leave a cell two partners.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Cell names listed in one message before the rest is counted.
_NAMES_SHOWN = 4


class PairingError(ValueError):
    """A ``--pair`` or ``--match`` that cannot be applied; the message names the fix."""


@dataclass(frozen=True)
class RunLevel:
    """An axis set for a whole run, differently in each (``None``: not set in that run)."""

    key: str
    baseline: str | None
    candidate: str | None


@dataclass
class Pairing:
    #: (A cell, B cell) in A's order.
    pairs: list[tuple[str, str]]
    run_level: list[RunLevel]
    #: How the cells were paired, one sentence.
    text: str
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)


def label(a_cell: str, b_cell: str) -> str:
    """A pair's name: the cell's when both runs call it the same, else ``A → B``."""
    return a_cell if a_cell == b_cell else f"{a_cell} → {b_cell}"


def names(cells: Sequence[str]) -> str:
    """Cell names for a one-line message: the first few, then how many more."""
    shown = ", ".join(cells[:_NAMES_SHOWN]) or "none"
    return shown + (f" and {len(cells) - _NAMES_SHOWN} more" if len(cells) > _NAMES_SHOWN else "")


def _axes(cell: dict[str, Any]) -> dict[str, str] | None:
    """The cell's axis values, ``None`` when matrix.json does not hold them as text."""
    axes = cell.get("axes")
    if isinstance(axes, dict) and all(isinstance(v, str) for v in axes.values()):
        return axes
    return None


def run_level(a_cells: Sequence[dict[str, Any]], b_cells: Sequence[dict[str, Any]]
              ) -> list[RunLevel]:
    """The keys each run sets to one value in all its cells, differently from the other run;
    none when a cell's axes are not known (nothing can be said of the whole run)."""
    a_axes, b_axes = [_axes(c) for c in a_cells], [_axes(c) for c in b_cells]
    if not a_axes or not b_axes or None in a_axes or None in b_axes:
        return []
    keys = sorted({k for axes in (*a_axes, *b_axes) for k in axes})
    out = []
    for key in keys:
        va, vb = {x.get(key) for x in a_axes}, {x.get(key) for x in b_axes}
        if len(va) == 1 and len(vb) == 1 and va != vb:
            out.append(RunLevel(key, va.pop(), vb.pop()))
    return out


def _explicit(a: dict[str, dict], b: dict[str, dict], given: Sequence[tuple[str, str]]
              ) -> list[tuple[str, str]]:
    taken_a: set[str] = set()
    taken_b: set[str] = set()
    for a_cell, b_cell in given:
        for cell, cells, taken, side in ((a_cell, a, taken_a, "A"), (b_cell, b, taken_b, "B")):
            if cell not in cells:
                raise PairingError(f"--pair {a_cell} {b_cell}: run {side} has no cell {cell} "
                                   f"(its cells: {names(list(cells))})")
            if cell in taken:
                raise PairingError(f"--pair: cell {cell} of run {side} is paired twice; give "
                                   "each cell one partner")
            taken.add(cell)
    return list(given)


def _by_identity(a: dict[str, dict], b: dict[str, dict], identity, strict: bool
                 ) -> list[tuple[str, str]]:
    """Pairs of cells with the same ``identity(cell)`` (``None``: pairs with nothing). An
    identity two cells of one run share pairs neither; ``strict``: it is an error."""
    groups: list[dict[Any, list[str]]] = []
    for side, cells in (("A", a), ("B", b)):
        group: dict[Any, list[str]] = {}
        for name, cell in cells.items():
            if (key := identity(cell)) is not None:
                group.setdefault(key, []).append(name)
        if strict and (twins := next((v for v in group.values() if len(v) > 1), None)):
            raise PairingError(f"--match: cells {names(twins)} of run {side} have the same "
                               "values of the matched axes; add the axis that tells them apart "
                               "to --match, or pair them with --pair A_CELL B_CELL")
        groups.append(group)
    ga, gb = groups
    return [(ga[k][0], gb[k][0]) for k in ga if k in gb and len(ga[k]) == len(gb[k]) == 1]


def _check_match(match: Sequence[str], a: dict[str, dict], b: dict[str, dict]) -> None:
    if not all(match):
        raise PairingError(f"--match {','.join(match)}: an empty key; name the axes, "
                           "e.g. --match env.MODE,workload.batch_size")
    known = {k for cells in (a, b) for c in cells.values() for k in _axes(c) or {}}
    if unknown := [k for k in match if k not in known]:
        raise PairingError(f"--match {','.join(match)}: no cell of either run has the axis "
                           f"{', '.join(unknown)} (axes: {', '.join(sorted(known)) or 'none'})")


def pair(a_cells: Sequence[dict[str, Any]], b_cells: Sequence[dict[str, Any]],
         given: Sequence[tuple[str, str]] = (), match: Sequence[str] | None = None,
         one_run: bool = False) -> Pairing:
    """Pair the cells of two matrix.json files: ``given`` (``--pair``) first, then on the
    ``match`` axes (``--match``), else by name and then by axes without the run-level keys.
    ``one_run``: both are the same run (A and B as cells of one sweep, ``order=rounds``): with
    ``given`` and no ``match``, only those pairs, the other cells not the comparison's."""
    a = {c["cell"]: c for c in a_cells}
    b = {c["cell"]: c for c in b_cells}
    pairs = _explicit(a, b, given)
    if one_run and pairs and match is None:
        return Pairing(pairs, [], "Cells of one run, paired as --pair says.")
    levels = run_level(a_cells, b_cells)
    rest_a = {n: c for n, c in a.items() if n not in {p for p, _ in pairs}}
    rest_b = {n: c for n, c in b.items() if n not in {q for _, q in pairs}}
    if match is not None:
        _check_match(match, a, b)
        pairs += _by_identity(rest_a, rest_b, lambda c: (
            None if (x := _axes(c)) is None else tuple(x.get(k) for k in match)), strict=True)
        how = f"on the axes {', '.join(match)} (--match)"
    else:
        dropped = {level.key for level in levels}
        by_axes = _by_identity(
            {n: c for n, c in rest_a.items() if n not in rest_b},
            {n: c for n, c in rest_b.items() if n not in rest_a},
            lambda c: None if (x := _axes(c)) is None else frozenset(
                (k, v) for k, v in x.items() if k not in dropped), strict=False)
        pairs += [(n, n) for n in rest_a if n in rest_b] + by_axes
        how = ("by their axes without " + ", ".join(sorted(dropped))
               + " (set for the whole run, differently in each)" if dropped
               else "by name, else by their axes" if by_axes else "by name")
    if given:
        how = f"as --pair says, the others {how}" if rest_a and rest_b else "as --pair says"
    order = {n: i for i, n in enumerate(a)}
    pairs.sort(key=lambda p: order[p[0]])
    paired_a, paired_b = {p for p, _ in pairs}, {q for _, q in pairs}
    return Pairing(pairs, levels, f"Cells paired {how}.",
                   [n for n in a if n not in paired_a], [n for n in b if n not in paired_b])
