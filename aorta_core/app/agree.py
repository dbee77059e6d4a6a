"""``sweep=agree``: one command, bare and under each collector, in interleaved rounds.

One Hydra job makes a cell per collector and one ``bare`` cell, then runs trial 0 of every cell,
trial 1 of every cell, and so on, so that drift of the machine (clocks, heat, other load) hits
every cell alike. With ``agree.collectors=auto`` every installed collector is tried; one that
cannot attach on this machine (its ``check_options`` or ``wrap_argv`` refuses) is left out and
said so, without failing the sweep. A collector whose times are not comparable
(``CollectorInfo.times_comparable=False``: Nsight Compute serialises and replays every kernel)
runs only ``agree.rounds_for_incomparable`` rounds. Before the rounds the plan and an estimate of
its wall time are printed, and after the first round the measured estimate of the rest. The
analysis of the records is :mod:`aorta_core.reports.agreement`.
"""

from __future__ import annotations

import copy
import statistics
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from rich.markup import escape

from aorta_core.app.driver import OTHER_RUN, RERUN, SweepAbort
from aorta_core.engine.cell_state import OtherRun, refuse, skip, trial_state, write_cell_file
from aorta_core.engine.cells import Cell, ConfigError, Place, build_cell
from aorta_core.engine.plugins import Registry
from aorta_core.engine.progress import console, error_line, trial_line, warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, TrialRecord, load_record
from aorta_core.engine.trial import probe_attach, run_trial
from aorta_core.reports.timeline import timeline_step

BARE = "bare"
AUTO = "auto"


def _variant(cfg: DictConfig, name: str, registry: Registry) -> DictConfig:
    """The job config with only collector ``name`` selected (none for ``bare``)."""
    variant = copy.deepcopy(cfg)
    with open_dict(variant):
        if name == BARE:
            variant.collector = None
        else:
            options = OmegaConf.structured(registry.collectors[name].info.options)
            extra = (cfg.agree.get("options") or {}).get(name) or {}
            variant.collector = {name: OmegaConf.merge(options, extra)}
    return variant


def _comparable(name: str, registry: Registry) -> bool:
    collector = registry.collectors.get(name)
    return collector.info.times_comparable if collector else True


def _fewer(cfg: DictConfig) -> int | None:
    """``agree.rounds_for_incomparable``, checked: a whole number >= 1, or ``None``."""
    fewer = cfg.agree.get("rounds_for_incomparable")
    if fewer is not None and (isinstance(fewer, bool) or not isinstance(fewer, int) or fewer < 1):
        raise SweepAbort(f"agree.rounds_for_incomparable={fewer!r} is not a whole number >= 1; "
                         "give e.g. agree.rounds_for_incomparable=1 (or null for every round)")
    return fewer


def _rounds(cfg: DictConfig, name: str, registry: Registry) -> int:
    """How many rounds cell ``name`` runs: every one (``trials``), or, for a collector whose times
    are not comparable, ``agree.rounds_for_incomparable`` of them (``null``: every one)."""
    trials, fewer = int(cfg.trials), _fewer(cfg)
    return trials if fewer is None or _comparable(name, registry) else min(trials, fewer)


def _marker(cfg: DictConfig, name: str, registry: Registry) -> dict[str, Any]:
    """What ``cell.json`` tells the analysis (:mod:`aorta_core.reports.agreement`)."""
    return {"collector": None if name == BARE else name,
            "times_comparable": _comparable(name, registry),
            "rounds": _rounds(cfg, name, registry),
            "tolerance_pct": float(cfg.agree.tolerance_pct),
            "reference": str(cfg.agree.reference)}


def _cells(cfg: DictConfig, registry: Registry) -> tuple[list[Cell], list[tuple[Place, str]]]:
    chosen = cfg.agree.collectors
    names = sorted(registry.collectors) if chosen == AUTO else [str(n) for n in chosen]
    cells, refused = [], []
    for name in [BARE, *names]:
        place = Place(name, Path(str(cfg.output)) / "cells" / name, {"collector": name})
        if name != BARE and name not in registry.collectors:
            refused.append((place, f"collector {name!r} is not installed; see `aorta plugins`"))
            continue
        try:
            cell = build_cell(_variant(cfg, name, registry), place, registry)
            reason = probe_attach(cell, registry) if name != BARE else None
        except ConfigError as exc:
            reason = str(exc)
        if reason is None:
            cells.append(cell)
        else:
            refused.append((place, reason))
    return cells, refused


def run_agreement(cfg: DictConfig, registry: Registry) -> dict[str, Any]:
    """Run the missing trials of every agreement cell, round by round."""
    _fewer(cfg)  # refused before anything runs
    cells, refused = _cells(cfg, registry)
    auto = cfg.agree.collectors == AUTO
    for place, reason in refused:
        if auto:
            _leave_out(cfg, place, reason, registry)
        else:
            refuse(place, reason, agree=_marker(cfg, place.name, registry))
    trials = int(cfg.trials)
    todo, whys, other = {}, [], []
    for cell in list(cells):
        rounds = _rounds(cfg, cell.name, registry)
        try:
            states = {i: why for i in range(rounds) if (why := trial_state(cell, i))}
        except OtherRun as exc:  # its folder is another run's: left as it is
            error_line(f"cell {cell.name}: {exc}")
            cells.remove(cell)
            other.append(cell.name)
            continue
        write_cell_file(cell, rounds, agree=_marker(cfg, cell.name, registry))
        todo[cell.name] = list(states)
        whys += [why for why in states.values() if why != "new"]
    _plan(cells, todo, trials)
    verdicts: dict[str, dict[str, int]] = {c.name: {} for c in cells}
    measured = False
    for index in range(trials):
        firsts = {}
        for cell in cells:
            if index in todo[cell.name]:
                record = run_trial(cell, index, registry, timeline_step(cell))
                trial_line(f"round {index + 1}/{trials} {cell.name}", record)
                counts = verdicts[cell.name]
                counts[record.verdict] = counts.get(record.verdict, 0) + 1
                firsts[cell.name] = record
        if auto and index == 0 and cells and cells[0].name == BARE:
            cells = [c for c in cells
                     if not _fails_where_bare_passes(cfg, c, cells[0], firsts, registry)]
        if firsts and not measured:
            measured = True
            _measured_estimate(cells, todo, index, firsts)
    return {"agree": verdicts, RERUN: whys, OTHER_RUN: bool(other) and not cells}


def _walls(cell: Cell) -> list[float]:
    """Wall times of ``cell``'s passing trials already on disk (an earlier run of this output)."""
    walls = []
    for path in sorted(cell.directory.glob("trial_*/" + RECORD_NAME)):
        try:
            record = load_record(path, cell.name, int(path.parent.name.split("_")[-1]))
        except (BadRecord, ValueError):
            continue
        if record.verdict == "pass" and record.wall_time_s is not None:
            walls.append(float(record.wall_time_s))
    return walls


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 60 else f"{value:.3g} s"


def _plan(cells: list[Cell], todo: dict[str, list[int]], trials: int) -> None:
    """One line of the plan (cells × rounds) and one of its estimated wall time: each cell's
    wall time recorded by an earlier run of this output (the bare cell's × the collector's
    slowdown), else a promise of the estimate after the first round."""
    rounds = ", ".join(f"{escape(c.name)} {len(todo[c.name])}" for c in cells)
    total = sum(len(todo[c.name]) for c in cells)
    console().print(f"[bold]agree[/] {len(cells)} cells × up to {trials} rounds, interleaved: "
                    f"{total} trials to run ({rounds})")
    if not total:
        return
    known = {c.name: statistics.median(w) for c in cells if (w := _walls(c))}
    bare = known.get(BARE)
    missing = [c.name for c in cells if todo[c.name] and c.name not in known]
    if missing or bare is None:
        console().print(f"[bold]agree[/] estimate: no wall time recorded yet for "
                        f"{escape(', '.join(missing) or BARE)}; the estimate follows the first "
                        "round")
        return
    seconds = sum(len(todo[c.name]) * known[c.name] for c in cells)
    slowdowns = ", ".join(f"{escape(c.name)} {known[c.name] / bare:.3g}x" for c in cells
                          if c.name != BARE and todo[c.name])
    console().print(f"[bold]agree[/] estimate: ~{_seconds(seconds)} for {total} trials (bare "
                    f"{_seconds(bare)} a trial recorded in this output"
                    f"{'; slowdown ' + slowdowns if slowdowns else ''})")


def _measured_estimate(cells: list[Cell], todo: dict[str, list[int]], index: int,
                       firsts: dict[str, TrialRecord]) -> None:
    """After the first round run: the rest's wall time from this round's trial of each cell
    (or the ones on disk of a cell that ran none in it)."""
    walls = {}
    for cell in cells:
        record = firsts.get(cell.name)
        wall = record.wall_time_s if record is not None else None
        if wall is None:
            earlier = _walls(cell)
            wall = statistics.median(earlier) if earlier else None
        walls[cell.name] = wall
    left = {c.name: sum(i > index for i in todo[c.name]) for c in cells}
    total = sum(left.values())
    took = sum(r.wall_time_s or 0.0 for r in firsts.values())
    unknown = [n for n, k in left.items() if k and walls[n] is None]
    head = f"[bold]agree[/] round {index + 1} took {_seconds(took)}"
    if not total:
        console().print(f"{head}; no trials left")
        return
    if unknown:
        console().print(f"{head}; {total} trials left, no estimate: no wall time for "
                        f"{escape(', '.join(unknown))}")
        return
    seconds = sum(k * walls[n] for n, k in left.items() if k)
    each = ", ".join(f"{escape(n)} {k}×{_seconds(walls[n])}" for n, k in left.items() if k)
    console().print(f"{head}; measured estimate for the rest: ~{_seconds(seconds)} for "
                    f"{total} trials ({each})")


def _leave_out(cfg: DictConfig, place: Place, reason: str, registry: Registry) -> None:
    """Auto mode tried this collector because it is installed, not because it was asked for."""
    warning_line(f"{place.name} cannot measure here ({reason}); left out of the agreement")
    skip(place, reason, agree=_marker(cfg, place.name, registry))


def _first(cell: Cell, firsts: dict[str, TrialRecord]) -> TrialRecord | None:
    """Trial 0 of ``cell``: run just now, or recorded by an earlier run (resume)."""
    if cell.name in firsts:
        return firsts[cell.name]
    try:
        return load_record(cell.trial_dir(0) / RECORD_NAME, cell.name, 0)
    except (FileNotFoundError, BadRecord):
        return None


def _fails_where_bare_passes(cfg: DictConfig, cell: Cell, bare: Cell,
                             firsts: dict[str, TrialRecord], registry: Registry) -> bool:
    """A collector whose first trial fails while the bare one passes cannot measure on this
    machine (Proton without a GPU, say): it is left out rather than failing every round."""
    record, reference = _first(cell, firsts), _first(bare, firsts)
    if cell is bare or record is None or reference is None:
        return False
    if record.verdict == "pass" or reference.verdict != "pass":
        return False
    place = Place(cell.name, cell.directory, cell.axes)
    _leave_out(cfg, place, f"its first trial failed where the bare run passed: {record.error}",
               registry)
    return True
