"""The end-of-run summary: verdicts per cell, where the files are, what failed."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from aorta_core.matrix import MatrixResult, build
from aorta_core.progress import auto_text, console, warning_line


def finish(output: Path) -> MatrixResult:
    """What ends a sweep (and ``aorta matrix``): the matrix files, report.html, the summary."""
    from aorta_core.reports.sweep import write_sweep_report

    result = build(output)
    report = write_sweep_report(output)
    if report is not None:
        result.paths.append(report)
    print_summary(result)
    return result


def _distinct_autos(cells: list[dict]) -> list[dict]:
    seen: dict[str, dict] = {}
    for cell in cells:
        if cell.get("auto"):
            seen.setdefault(repr(sorted(cell["auto"].items())), cell["auto"])
    return list(seen.values())


def print_summary(result: MatrixResult) -> None:
    table = Table(title="aorta sweep", title_justify="left")
    for column in ("cell", "pass", "fail", "error", "median wall s"):
        table.add_column(column, justify="left" if column == "cell" else "right")
    for cell in result.cells:
        t = cell["trials"]
        wall = (cell.get("wall_time_s") or {}).get("median")
        table.add_row(
            cell["cell"], str(t["pass"]), str(t["fail"]), str(t["error"]),
            "left out" if cell.get("skipped") else "not run" if cell.get("error")
            else (f"{wall:.2f}" if wall is not None else "-"),
        )
    out = console()
    out.print(table)
    for auto in _distinct_autos(result.cells):
        out.print(f"[dim]auto ({escape(auto['machine'])}):[/] {escape(auto_text(auto['chosen']))}")
    for bad in result.bad:
        warning_line(f"bad record {bad}; left out: run the sweep again to redo that trial")
    bad = [c["cell"] for c in result.cells if not c.get("skipped") and (
        c.get("error") or c["trials"]["fail"] or c["trials"]["error"])]
    if bad:
        out.print(f"[red]cells with failed or unrun trials:[/] {', '.join(bad)}")
    for path in result.paths:
        out.print(f"wrote {path}")
