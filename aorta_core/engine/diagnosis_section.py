"""The sweep's "Diagnosis" section (perf.md, and report.html through the same object): one row
per trial that has a ``diagnosis.json`` (``diagnose=true`` or ``aorta diagnose``).

It reads the files :mod:`aorta_core.reports.diagnose` wrote, and nothing else, so that the
engine's perf.md can show them without importing the reports layer.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.files import FileRefused, read_limited
from aorta_core.engine.collector_sections import MAX_ROWS, CollectorSection
from aorta_core.engine.progress import short_names, warning_line

DIAGNOSIS_NAME = "diagnosis.json"
#: As the console and perf.md's main table shorten cell names.
NAME_WIDTH = 40
COLUMNS = ["cell", "trial", "ranks", "step ms", "compute ms", "comm exposed ms",
           "of which wait ms", "host ms", "data ms", "straggler"]
#: Findings quoted below the paragraph, over all trials (each trial's first ones).
MAX_FINDINGS = 30


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _row(cell: str, trial: str, found: Mapping[str, Any]) -> list[Any]:
    means = [r.get("mean", {}) for r in (found.get("ranks") or {}).values()]

    def part(key: str) -> float | None:
        value = _median([m[key] for m in means if isinstance(m.get(key), int | float)])
        return round(value, 2) if value is not None else None

    stragglers = found.get("stragglers") or []
    straggler = ", ".join(f"rank {s['rank']}: +{s['excess_ms_per_step']:.1f} ms/step "
                          f"({s['category']})" for s in stragglers) or "none"
    return [cell, trial, len(means), part("step_ms"), part("compute_ms"),
            part("comm_exposed_ms"), part("comm_wait_ms"), part("host_ms"), part("data_ms"),
            straggler]


def read_diagnoses(matrix: Mapping[str, Any], warn: Callable[[str], None] = warning_line
                   ) -> list[tuple[str, Path, Mapping[str, Any]]]:
    """(cell, path, diagnosis) of each trial's diagnosis.json, in the matrix's order; one that
    cannot be read is left out with a ``warn`` line."""
    output = Path(str(matrix.get("output", ".")))
    found: list[tuple[str, Path, Mapping[str, Any]]] = []
    for cell in matrix.get("cells", ()):
        folder = output / str(cell.get("dir", ""))
        if not cell.get("dir") or not folder.is_dir():
            continue
        for path in sorted(folder.glob(f"trial_*/{DIAGNOSIS_NAME}")):
            try:
                found.append((str(cell["cell"]), path,
                              msgspec.json.decode(read_limited(path, output))))
            except (OSError, FileRefused, msgspec.DecodeError, KeyError) as exc:
                warn(f"{path}: left out of the diagnosis section ({exc})")
    return found


def diagnosis_section(matrix: Mapping[str, Any]) -> list[CollectorSection]:
    """The section (a list of zero or one), for perf.md and report.html; empty when no trial of
    the sweep has a diagnosis."""
    found = read_diagnoses(matrix)
    # the cells named as in the main table: what tells them apart (full names in matrix.json)
    cells = list(dict.fromkeys(f[0] for f in found))
    names = dict(zip(cells, short_names(cells, NAME_WIDTH), strict=True))
    rows: list[list[Any]] = []
    findings: list[str] = []
    for cell, path, diagnosis in found:
        trial = path.parent.name
        try:
            rows.append(_row(names[cell], trial, diagnosis))
            findings += [f"{names[cell]} {trial}: {f['text']}"
                         for f in (diagnosis.get("findings") or [])[:3]]
            if diagnosis.get("what_if"):
                findings.append(f"{names[cell]} {trial}: what if: {diagnosis['what_if']['text']}")
        except (KeyError, TypeError, AttributeError) as exc:
            warning_line(f"{path}: left out of the diagnosis section ({exc})")
    if not rows:
        return []
    return [CollectorSection(
        collector="aorta diagnose", title="Diagnosis",
        paragraphs=["Each trial's diagnosis.json (docs/diagnose.md): the parts of a profiled "
                    "step in ms, the median over ranks of each rank's mean over its steps; "
                    "compute, communication hidden and exposed, host time with the device idle, "
                    "data and other device work sum to the step. A straggler's own time per "
                    "step exceeds the other ranks' median. Findings, each trial's first three "
                    "ranked by ms per step at stake, and what the step would take without its "
                    "stragglers (the ranks' steps replayed with their shared collectives as "
                    "barriers):",
                    *(findings[:MAX_FINDINGS] or ["none"])],
        columns=COLUMNS, rows=rows[:MAX_ROWS], more_rows=max(0, len(rows) - MAX_ROWS))]
