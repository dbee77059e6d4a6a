"""The end-of-run summary: verdicts per cell, where the files are, what failed."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from aorta_core.engine.diagnosis_section import NAME_WIDTH, read_diagnoses
from aorta_core.engine.matrix import MatrixResult, build, incomplete, is_agreement
from aorta_core.engine.progress import auto_text, console, short_names, warning_line, wrote
from aorta_core.engine.records import read_json
from aorta_core.engine.tables import orient


def finish(output: Path) -> MatrixResult:
    """What ends a sweep (and ``aorta matrix``): the matrix files, agreement.json of a
    ``sweep=agree`` (before report.html, which shows it), report.html, the summary."""
    from aorta_core.reports.agreement import write_agreement
    from aorta_core.reports.agreement_section import agreement_text_section
    from aorta_core.reports.sweep import write_sweep_report

    # Only a sweep=agree has cells marked ``agree`` (in cell.json); agreement.json comes first,
    # so that perf.md shows its verdicts.
    agreement = write_agreement(output) if is_agreement(output) else None
    sections = [agreement_text_section(read_json(agreement))] if agreement is not None else []
    result = build(output, sections)
    if agreement is not None:
        result.paths.append(agreement)
    report = write_sweep_report(output)
    if report is not None:
        result.paths.append(report)
    if agreement is not None:
        print_agreement(agreement, console())
    print_summary(result, output)
    return result


_VERDICT_STYLE = {"agree": "green", "disagree": "red"}


def _num(value: Any, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{suffix}"


def _signed_pct(value: Any) -> str:
    return "" if value is None else f"{value:+.1f} %"


def print_agreement(path: Path, out: Console) -> None:
    """The verdicts of ``agreement.json``: per metric the overall one, and each source's where
    two or more measured it (Δ: from the consensus), then the overhead (Δ: over the bare wall
    time); collectors left out or refused are named once below the table."""
    agreement = read_json(path)
    table = Table(title=f"agreement (tolerance {agreement['tolerance_pct']:g} %)",
                  title_justify="left")
    for column in ("metric", "source", "median", "Δ", "verdict"):
        table.add_column(column, justify="right" if column in ("median", "Δ") else "left")
    absent = {n: ("left out of the agreement", c["skipped"]) if c.get("skipped") else
              ("could not run", c["error"])
              for n, c in agreement["collectors"].items() if c.get("skipped") or c.get("error")}
    for metric, entry in agreement["metrics"].items():
        measured = [(n, s["median"], s["deviation_pct"], s)
                    for n, s in entry["sources"].items() if s["n"]]
        rows = [("all", entry["consensus"], None, entry), *(measured if len(measured) > 1 else [])]
        for i, (name, median, deviation, judged) in enumerate(rows):
            table.add_row(Text(metric if i == 0 else ""), Text(name), _num(median),
                          _signed_pct(deviation),
                          Text(judged["verdict"], style=_VERDICT_STYLE.get(judged["status"], "")))
    for i, (name, o) in enumerate((n, o) for n, o in agreement["overhead"].items()
                                  if n not in absent):
        table.add_row("wall time" if i == 0 else "", Text(name), _num(o["median_s"], " s"),
                      _signed_pct(o["overhead_pct"]), Text(o["verdict"]))
    out.print(table)
    for name, (what, reason) in absent.items():
        reason = str(reason).removeprefix(f"{name}: ")
        out.print(Text.assemble((f"{what}:", "dim"), f" {name}: {reason}"))


def _distinct_autos(cells: list[dict]) -> list[dict]:
    """The distinct ``auto`` choices of the cells (as cell.json gave them: one edited into
    another shape is left out)."""
    seen: dict[str, dict] = {}
    for cell in cells:
        auto = cell.get("auto")
        if isinstance(auto, dict) and isinstance(auto.get("chosen"), dict):
            seen.setdefault(repr(sorted(auto["chosen"].items())) + repr(auto.get("machine")),
                            auto)
    return list(seen.values())


#: What the end summary shows of each cell (its verdict counts, then its median wall time).
_FIELDS = ("pass", "fail", "error", "median wall s")


def _summary_values(cell: dict) -> list[str]:
    t = cell["trials"]
    wall = (cell.get("wall_time_s") or {}).get("median")
    return [str(t["pass"]), str(t["fail"]), str(t["error"]),
            "left out" if cell.get("skipped") else "not run" if cell.get("error")
            else f"{wall:.2f}" if wall is not None else "not measured"]


#: Cells whose diagnosis the end summary shows; perf.md's Diagnosis section has every trial.
MAX_DIAGNOSED_CELLS = 8
#: Up to this many diagnosed cells, each one's top finding is quoted below its line.
FINDINGS_UP_TO = 3


def _straggler_digest(diagnoses: list[Mapping[str, Any]]) -> str:
    """``straggler rank 1 (compute, +98.3 ms/step) in 2/2 trials``, one per rank and cause
    (the median of its ms/step over those trials), or ``no straggler``."""
    found: dict[tuple[Any, Any], list[float]] = {}
    for diagnosis in diagnoses:
        for s in diagnosis.get("stragglers") or []:
            found.setdefault((s["rank"], s["category"]), []).append(
                float(s["excess_ms_per_step"]))
    return "; ".join(
        f"straggler rank {rank} ({category}, +{statistics.median(ms):.1f} ms/step) in "
        f"{len(ms)}/{len(diagnoses)} trial(s)"
        for (rank, category), ms in found.items()) or "no straggler"


def _step_ms(diagnoses: list[Mapping[str, Any]]) -> str:
    """The median over trials of each trial's median over ranks of their mean step."""
    steps = [statistics.median(r["mean"]["step_ms"] for r in d["ranks"].values())
             for d in diagnoses if d.get("ranks")]
    return f"step {statistics.median(steps):.4g} ms" if steps else "no step in common"


def print_diagnoses(output: Path, cells: list[dict[str, Any]], out: Console) -> None:
    """Per cell that has trials with a diagnosis.json (``diagnose=true``): one line of its step
    time and stragglers, for at most :data:`MAX_DIAGNOSED_CELLS` cells, and below it the top
    finding of its first trial that has one where at most :data:`FINDINGS_UP_TO` cells were
    diagnosed. A file the matrix step could not use is left out silently: that step warned
    of it."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for cell, _, diagnosis in read_diagnoses({"output": str(output), "cells": cells},
                                             lambda line: None):
        by_cell.setdefault(cell, []).append(diagnosis)
    if not by_cell:
        return
    out.print("[bold]diagnosis[/] [dim](each trial's diagnosis.json; docs/diagnose.md)[/]")
    names = dict(zip(by_cell, short_names(list(by_cell), NAME_WIDTH), strict=True))
    for cell, diagnoses in list(by_cell.items())[:MAX_DIAGNOSED_CELLS]:
        try:
            line = f"{_step_ms(diagnoses)}; {_straggler_digest(diagnoses)}"
            finding = next((f["text"] for d in diagnoses for f in d.get("findings") or []), None)
        except (KeyError, TypeError, AttributeError, ValueError, statistics.StatisticsError):
            line, finding = "its diagnosis.json is not of the expected shape", None
        out.print(Text(f"  {names[cell]}: {line}"))
        if finding is not None and len(by_cell) <= FINDINGS_UP_TO:
            out.print(Text(f"    {' '.join(str(finding).split())}", style="dim"))
    if len(by_cell) > MAX_DIAGNOSED_CELLS:
        out.print(Text(f"  … {len(by_cell) - MAX_DIAGNOSED_CELLS} more cell(s): perf.md's "
                       "Diagnosis section has every trial", style="dim"))


def print_summary(result: MatrixResult, output: Path) -> None:
    """The verdicts per cell: cells as rows, or as columns where that is narrower (a sweep of
    two or three cells); each cell named by what tells it from the others where the full names
    do not fit the console (a CI log, a pipe: 80 columns), and a name that still does not fit
    wraps, never cut. Then the trials' diagnoses (:func:`print_diagnoses`)."""
    out = console()
    layout = orient([c["cell"] for c in result.cells], _FIELDS,
                    [_summary_values(c) for c in result.cells], out.width, field_corner="")
    table = Table(title="aorta sweep", title_justify="left")
    for i, column in enumerate(layout.header):
        table.add_column(Text(column), justify="left" if i == 0 else "right", overflow="fold")
    for row in layout.rows:
        table.add_row(*map(Text, row))  # a name is text, never markup
    out.print(table)
    if layout.shortened:
        out.print("[dim]cell names shortened to what tells them apart (… marks the cut); "
                  "the full names are in matrix.json[/]")
    for auto in _distinct_autos(result.cells):
        out.print(f"[dim]auto ({escape(str(auto.get('machine')))}):[/] "
                  f"{escape(auto_text(auto['chosen']))}")
    for bad in result.bad:
        warning_line(f"bad record {bad}; left out: run the sweep again to redo that trial")
    bad = [c["cell"] for c in result.cells if incomplete(c)]
    if bad:
        out.print(f"[red]cells with failed or unrun trials:[/] {escape(', '.join(bad))}")
    print_diagnoses(output, result.cells, out)
    for path in result.paths:
        wrote(path)
