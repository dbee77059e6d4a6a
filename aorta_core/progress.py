"""What the user sees on stderr while a sweep runs, and the summary at its end."""

from __future__ import annotations

import functools
from typing import Any

from rich.console import Console
from rich.markup import escape

_STYLE = {"pass": "green", "fail": "red", "error": "magenta"}


@functools.cache
def console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def error_line(message: str) -> None:
    console().print(f"[bold red]aorta: error:[/] {escape(message)}")


def warning_line(message: str) -> None:
    console().print(f"[yellow]aorta: warning:[/] {escape(message)}")


def collector_warning(name: str, note: str) -> None:
    """One of collector ``name``'s warnings, named once: collectors often name themselves."""
    warning_line(note if note.startswith(f"{name}: ") else f"{name}: {note}")


def trial_line(label: str, record: Any) -> None:
    """``  <label> pass 1.23 s  <reason>``, then the trial's warnings."""
    verdict, wall = record.verdict, record.wall_time_s
    timing = f"{wall:.2f} s" if wall is not None else "not run"
    reason = f"  {escape(record.error)}" if record.error else ""
    console().print(f"  {escape(label)} [{_STYLE[verdict]}]{verdict}[/] {timing}{reason}")
    for name, notes in record.warnings.items():
        for note in notes:
            collector_warning(name, note)


def auto_text(chosen: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in chosen.items()) or "nothing to choose"


class CellProgress:
    """A live status line per running trial, then one result line per trial."""

    def __init__(self, cell: Any, trials: int, skipped: int) -> None:
        self.cell, self.trials, self.skipped = cell, trials, skipped
        self.status = None

    def __enter__(self) -> CellProgress:
        axes = " ".join(f"{k}={v}" for k, v in self.cell.axes.items()) or "(no axes)"
        collectors = ",".join(self.cell.collectors) or "none"
        line = f"[bold]cell[/] {escape(self.cell.name)}  {escape(axes)}  collectors: {collectors}"
        if self.cell.auto is not None:
            line += f"\n  [dim]auto ({escape(self.cell.auto.machine)}):[/] " + escape(
                auto_text(self.cell.auto.chosen))
        if self.skipped:
            line += f"  [dim]({self.skipped}/{self.trials} trials already recorded)[/]"
        console().print(line)
        return self

    def start(self, index: int) -> None:
        self.status = console().status(f"trial {index + 1}/{self.trials} running ...")
        self.status.start()

    def done(self, index: int, record: Any) -> None:
        if self.status is not None:
            self.status.stop()
        trial_line(f"trial {index + 1}/{self.trials}", record)

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()
