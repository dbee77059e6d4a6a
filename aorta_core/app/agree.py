"""``sweep=agree``: one command, bare and under each collector, in interleaved rounds.

One Hydra job makes a cell per collector and one ``bare`` cell, then runs trial 0 of every cell,
trial 1 of every cell, and so on, so that drift of the machine (clocks, heat, other load) hits
every cell alike. With ``agree.collectors=auto`` every installed collector is tried; one that
cannot attach on this machine (its ``check_options`` or ``wrap_argv`` refuses) is left out and
said so, without failing the sweep. The analysis of the records is
:mod:`aorta_core.reports.agreement`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from rich.markup import escape

from aorta_core.engine.cell_state import completed, refuse, skip, write_cell_file
from aorta_core.engine.cells import Cell, ConfigError, Place, build_cell
from aorta_core.engine.plugins import Registry
from aorta_core.engine.progress import console, trial_line, warning_line
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


def _marker(cfg: DictConfig, name: str, registry: Registry) -> dict[str, Any]:
    """What ``cell.json`` tells the analysis (:mod:`aorta_core.reports.agreement`)."""
    collector = registry.collectors.get(name)
    return {"collector": None if name == BARE else name,
            "times_comparable": collector.info.times_comparable if collector else True,
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
    cells, refused = _cells(cfg, registry)
    auto = cfg.agree.collectors == AUTO
    for place, reason in refused:
        if auto:
            _leave_out(cfg, place, reason, registry)
        else:
            refuse(place, reason, agree=_marker(cfg, place.name, registry))
    trials = int(cfg.trials)
    todo = {}
    for cell in cells:
        write_cell_file(cell, trials, agree=_marker(cfg, cell.name, registry))
        todo[cell.name] = [i for i in range(trials) if not completed(cell, i)]
    names = escape(", ".join(c.name for c in cells))
    console().print(f"[bold]agree[/] {names}: {trials} rounds, "
                    "interleaved")
    verdicts: dict[str, dict[str, int]] = {c.name: {} for c in cells}
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
    return {"agree": verdicts}


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
