"""What the user sees on stderr while a sweep runs, and the summary at its end."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aorta_core.api.oneline import named_once

if TYPE_CHECKING:  # rich loads with the first line printed: `aorta parse` prints none
    from rich.console import Console

_STYLE = {"pass": "green", "fail": "red", "error": "magenta"}


#: The widths a console takes from ``COLUMNS`` or the terminal: 0 would drop every line.
_WIDTHS = (40, 1000)


def clamped_width(width: int) -> int:
    """``width`` within :data:`_WIDTHS`."""
    return min(max(width, _WIDTHS[0]), _WIDTHS[1])


#: Where aorta's lines go: set by :func:`bind_console` (empty: ``sys.stderr`` at the first line).
_stderr: list[Any] = []


@functools.cache
def console() -> Console:
    """stderr, as :func:`bind_console` found it; text from paths, names and messages is passed
    through ``escape`` (or as ``Text``), and emoji codes are off, so that ``[/x]`` or ``:fire:``
    in a path prints as itself."""
    from rich.console import Console

    screen = Console(file=_stderr[0] if _stderr else stream_of_ones_own(sys.stderr),
                     highlight=False, soft_wrap=True, emoji=False)
    if screen.width != clamped_width(screen.width):  # else it follows the terminal's size
        screen.width = clamped_width(screen.width)
    return screen


def bind_console() -> None:
    """aorta's lines go to the stderr of this moment (``aorta``'s start) from now on, through a
    stream of their own: a plugin that later replaces or closes ``sys.stderr`` cannot silence
    them. Rich is imported only with the first line."""
    console.cache_clear()
    _stderr[:] = [stream_of_ones_own(sys.stderr)]


def stream_of_ones_own(stream: Any) -> Any:
    """A new text stream on ``stream``'s fd, line-buffered, which closing or replacing
    ``stream`` leaves open; ``stream`` itself where it has no fd (``None``, a test's)."""
    try:
        return open(stream.fileno(), "w", encoding=stream.encoding,
                    errors=stream.errors, closefd=False, buffering=1)
    except (AttributeError, ValueError, OSError):
        return stream


def escape(text: str) -> str:
    """Rich's ``markup.escape`` (imported at the first use)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def error_line(message: str) -> None:
    console().print(f"[bold red]aorta: error:[/] {escape(message)}")


def warning_line(message: str) -> None:
    console().print(f"[yellow]aorta: warning:[/] {escape(message)}")


def wrote(path: object) -> None:
    """``wrote <path>``: a path is text, never markup (a folder may be named ``[z]``)."""
    console().print(f"wrote {escape(str(path))}")


def collector_warning(name: str, note: str) -> None:
    """One of collector ``name``'s warnings, named once."""
    warning_line(named_once(name, note))


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


def cell_label(name: str, axes: Mapping[str, str], swept: Sequence[str]) -> str:
    """What tells this cell from the sweep's others: its values of the swept keys (cells that run
    in parallel print their lines interleaved, so each trial line carries it)."""
    return " ".join(f"{k}={axes[k]}" for k in swept if k in axes) or name


def _shared_start(texts: list[str]) -> int:
    """How many characters every one of ``texts`` starts with."""
    return next((i for i, chars in enumerate(zip(*texts, strict=False))
                 if len(set(chars)) > 1),
                min(map(len, texts)))


def _last_key(part: str) -> str:
    key, sep, value = part.partition("=")
    return key.rsplit(".", 1)[-1] + sep + value


def short_names(names: Sequence[str], width: int) -> list[str]:
    """``names`` as they fit ``width`` where possible, and never cut to the same text: the
    ``key=value`` parts every name has are dropped (``…`` marks where), dotted keys keep their
    last part where no two keys or names then read the same, then the characters every remaining
    name starts and ends with are dropped."""
    if len(names) < 2 or max(map(len, names)) <= width:
        return list(names)
    parts = [name.split(",") for name in names]
    shared = set.intersection(*map(set, parts))
    parts = [["…"] * bool(shared) + [x for x in p if x not in shared] for p in parts]
    last = [[_last_key(x) for x in p] for p in parts]
    unique = len({tuple(p) for p in last}) == len({tuple(p) for p in parts})
    if unique and all(len({x.partition("=")[0] for x in p}) == len(p) for p in last):
        parts = last
    kept = [",".join(p) for p in parts]
    if max(map(len, kept)) <= width:
        return kept
    head = _shared_start(kept)
    tail = min(_shared_start([k[::-1] for k in kept]), min(map(len, kept)) - head)
    return [("…" if head else "") + k[head:len(k) - tail] + ("…" if tail else "") for k in kept]


#: How the cell's header names the recorded trials that run again, by why they do.
_AGAIN = {"error": "that errored", "fail": "that failed", "bad": "with an unusable record"}


def rerun_what(whys: Iterable[str]) -> str:
    """``2 that errored, 1 with an unusable record``: the recorded trials that run again, by why
    each does (as :func:`aorta_core.engine.cell_state.trial_state` says; ``new`` is not one)."""
    whys = list(whys)
    return ", ".join(f"{n} {_AGAIN[why]}" for why in _AGAIN if (n := whys.count(why)))


def _again(todo: Mapping[int, str], retry: str) -> str:
    """The cell header's note of its recorded trials that run again."""
    again = [why for why in todo.values() if why in _AGAIN]
    if not again:
        return ""
    policy = f": retry={retry}" if set(again) - {"bad"} else ""
    return f"{rerun_what(again)} run{'s' if len(again) == 1 else ''} again{policy}"


def _kept(verdicts: list[str]) -> str:
    """The cell header's note of its kept records that measured nothing or failed, and the retry
    policy that runs them again (after a fix, a plain re-run keeps them)."""
    if not verdicts:
        return ""
    policy = "failed" if "fail" in verdicts else "errored"
    one = len(verdicts) == 1
    return (f"{rerun_what(verdicts)} {'is' if one else 'are'} kept: retry={policy} runs "
            f"{'it' if one else 'them'} again")


class CellProgress:
    """A live status line per running trial, then one result line per trial, named by ``label``
    (:func:`cell_label`). ``todo``: the trials that run, each with why (new, or run again);
    ``recorded``: how many of the cell's trials are kept as recorded; ``header``: whether the
    cell's line is printed (a later round of ``order=rounds`` prints it only to say a retry);
    ``kept``: the verdicts of kept records that errored or failed
    (:func:`aorta_core.engine.cell_state.kept_unmeasured`)."""

    def __init__(self, cell: Any, trials: int, todo: Mapping[int, str], label: str,
                 recorded: int, header: bool = True, kept: list[str] | None = None) -> None:
        self.cell, self.trials, self.todo, self.label = cell, trials, todo, label
        self.recorded, self.header, self.kept = recorded, header, kept or []
        self.status = None

    def __enter__(self) -> CellProgress:
        again = _again(self.todo, self.cell.retry)
        if not (self.header or again):
            return self
        axes = " ".join(f"{k}={v}" for k, v in self.cell.axes.items()) or "(no axes)"
        collectors = escape(",".join(self.cell.collectors) or "none")
        line = f"[bold]cell[/] {escape(self.cell.name)}  {escape(axes)}  collectors: {collectors}"
        if self.cell.auto is not None:
            line += f"\n  [dim]auto ({escape(self.cell.auto.machine)}):[/] " + escape(
                auto_text(self.cell.auto.chosen))
        recorded = self.recorded
        notes = [f"{recorded}/{self.trials} trials already recorded"] if recorded else []
        notes += [note for note in (_kept(self.kept), again) if note]
        if notes:
            line += f"  [dim]({escape('; '.join(notes))})[/]"
        console().print(line)
        return self

    def start(self, index: int) -> None:
        self.status = console().status(
            f"{escape(self.label)} trial {index + 1}/{self.trials} running ...")
        self.status.start()

    def done(self, index: int, record: Any) -> None:
        if self.status is not None:
            self.status.stop()
        attempt = f" (attempt {record.attempt})" if record.attempt > 1 else ""
        trial_line(f"{self.label} trial {index + 1}/{self.trials}{attempt}", record)

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()
