"""``aorta parse OUTPUT --kernels``: the kernel tables of a finished sweep's trials, written
again from their artifacts (``kernels.parquet`` and each record's ``kernels`` field) without
running anything: for outputs recorded before collectors had ``kernel_table``, or after a
plugin's table changed.

Each collector is asked as a trial asks it (``parse_metrics``, then ``kernel_table`` in the same
child), and the new table is made beside the old one: it replaces it only when every collector
of the trial that may have rows gave them again. A collector not loaded now, options that no
longer fit, artifacts pruned since, or a hook that fails or gives nothing keep the recorded table
(one line says why): a table is never lost to what cannot make it again."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from aorta_core.api.files import remove
from aorta_core.api.oneline import named_once
from aorta_core.engine.kernel_tables import KERNELS_NAME, KernelTables, has_kernel_table
from aorta_core.engine.metrics import Notes, collector_metrics
from aorta_core.engine.plugins import collector_options
from aorta_core.engine.records import (
    RECORD_NAME,
    BadRecord,
    TrialRecord,
    load_record,
    write_record,
)

#: The table being made, beside the one it may replace.
NEW_NAME = f".{KERNELS_NAME}.new"


def write_kernel_tables(output: Path, registry, say: Callable[[str], None],
                        warn: Callable[[str], None]) -> int:
    """Rewrite every trial's table under ``output``; the number of trials that have one."""
    with_table = 0
    for path in sorted(output.glob(f"cells/*/trial_*/{RECORD_NAME}")):
        try:
            record = load_record(path)
        except BadRecord as exc:
            warn(f"{exc}; its kernel table is left as it is")
            continue
        trial = path.parent
        tables, notes = KernelTables(trial / NEW_NAME), Notes()
        remove(tables.path, trial)  # left by an interrupted rebuild
        lacking = [why for name in record.collectors
                   if (why := _ask(registry, name, trial, record, tables, notes))]
        for name, lines in notes.by_collector.items():
            for line in lines:
                warn(named_once(name, line))
        old = trial / KERNELS_NAME
        if lacking and old.exists():
            remove(tables.path, trial)
            with_table += record.kernels is not None
            say(f"{trial}: kernel table kept as recorded ({'; '.join(lacking)})")
            continue
        if tables.written is None:
            remove(old, trial)
        else:
            os.replace(tables.path, old)
        kernels = tables.record()
        write_record(path, msgspec.structs.replace(record, kernels=kernels))
        with_table += kernels is not None
        say(f"{trial}: {kernels.rows if kernels else 'no'} kernel rows")
    return with_table


def _ask(registry, name: str, trial: Path, record: TrialRecord, tables: KernelTables,
         notes: Notes) -> str | None:
    """Add collector ``name``'s rows to ``tables``; why its rows of the recorded table cannot
    be made again, or ``None``."""
    folder = trial / name
    if name not in registry.collectors:
        return f"{name} is not loaded" if folder.is_dir() else None
    if not has_kernel_table(registry, name):
        return None
    if not folder.is_dir():
        return f"{name}'s artifacts are gone"
    try:
        options = collector_options(registry.collectors[name].info.options,
                                    record.collectors[name].options)
    except Exception:  # options renamed since the run, or values of another type
        return f"the options it recorded do not fit {name}'s options now"
    before = len(tables.rows)
    collector_metrics(registry, name, folder, options, notes, tables)
    return f"{name} gave no rows" if len(tables.rows) == before else None
