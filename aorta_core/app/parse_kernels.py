"""``aorta parse OUTPUT --kernels``: the kernel tables of a finished sweep's trials, written
again from their artifacts (``kernels.parquet`` and each record's ``kernels`` field) without
running anything: for outputs recorded before collectors had ``kernel_table``, or after a
plugin's table changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from aorta_core.api.files import remove
from aorta_core.api.oneline import named_once
from aorta_core.engine.kernel_tables import KERNELS_NAME, KernelTables
from aorta_core.engine.metrics import Notes
from aorta_core.engine.plugins import collector_options
from aorta_core.engine.records import (
    RECORD_NAME,
    BadRecord,
    KernelsRecord,
    load_record,
    write_record,
)


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
        tables, notes = KernelTables(path.parent / KERNELS_NAME), Notes()
        remove(tables.path, path.parent)
        for name, entry in record.collectors.items():
            folder = path.parent / name
            if name not in registry.collectors or not folder.is_dir():
                continue
            try:
                options = collector_options(registry.collectors[name].info.options,
                                            entry.options)
            except Exception:  # options renamed since the run, or values of another type
                warn(named_once(name, f"the options {path} recorded do not fit its options "
                                      "now; its kernel table is left out"))
                continue
            add = tables.add
            tables.took(notes.call(name, "kernel_table",
                                   lambda n=name, f=folder, o=options, a=add: a(registry, n, f, o),
                                   None))
        for name, lines in notes.by_collector.items():
            for line in lines:
                warn(named_once(name, line))
        kernels = tables.record()
        write_record(path, msgspec.structs.replace(
            record, kernels=KernelsRecord(**kernels) if kernels else None))
        with_table += kernels is not None
        say(f"{path.parent}: {kernels['rows'] if kernels else 'no'} kernel rows")
    return with_table
