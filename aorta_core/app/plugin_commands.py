"""``aorta <name>``: the commands collectors add through their ``aorta_commands`` hook.

A command is looked up only when the first argument is a bare word that is none of the core's
tools, so a sweep (``key=value`` overrides) never waits for it. One collector's broken hook, a
malformed answer or a name already taken costs that command, with a warning naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aorta_core.api.contracts import Command
from aorta_core.api.oneline import exception_line
from aorta_core.engine.isolation import load_in_process
from aorta_core.engine.progress import error_line, warning_line


@dataclass(frozen=True)
class CollectorCommand:
    collector: str
    command: Command


def collector_commands(registry, reserved: frozenset[str]) -> dict[str, CollectorCommand]:
    """Every loaded collector's commands by name, in collector name order (the first claim of a
    name wins); ``reserved``: the core's own command names."""
    found: dict[str, CollectorCommand] = {}
    for name in sorted(registry.collectors):  # its commands run here: made here, tried first
        outcome = load_in_process(lambda n=name: _commands(registry.call(n, "aorta_commands")))
        if outcome.failure is not None:
            warning_line(f"collector {name}: aorta_commands failed ({outcome.failure}); "
                         "its commands are left out")
            continue
        for command, problem, made in outcome.value:
            taken = found.get(command)
            problem = problem or (
                f"'{command}' is one of aorta's own commands" if command in reserved else
                f"'{command}' is already added by collector {taken.collector}" if taken else None)
            if problem:
                warning_line(f"collector {name}: {problem}; that command is left out")
            else:
                found[command] = CollectorCommand(name, made)
    return found


def _commands(value: object) -> list[tuple[str, str | None, Command | None]]:
    """The names ``aorta_commands`` returned, each with why it cannot be used (or ``None``) and
    its command."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [("?", f"aorta_commands returned {type(value).__name__}, not a dict of Command",
                 None)]
    checked = []
    for name, command in value.items():
        usable = is_command_name(name) and isinstance(command, Command) \
            and callable(command.main)
        checked.append((str.__str__(str(name)), None if usable else (
            f"aorta_commands entry {str(name)[:40]!r} is not a command name (letters, digits, "
            "'-') with a Command whose main is callable"), command if usable else None))
    return checked


def is_command_name(text: object) -> bool:
    """Letters, digits and ``-``, starting with a letter: a word no override can be."""
    return isinstance(text, str) and text[:1].isalpha() \
        and all(c.isalnum() or c == "-" for c in text)


def run_command(name: str, found: CollectorCommand, args: list[str]) -> int:
    """Run one collector command; its crash is one line and status 1, never a traceback."""
    try:
        status = found.command.main(args)
    except SystemExit as exc:  # argparse inside a command exits: its status is the answer
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:
        error_line(f"aorta {name} (collector {found.collector}) failed: {exception_line(exc)}")
        return 1
    return status if isinstance(status, int) else 0
