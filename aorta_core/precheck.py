"""Compose the config once before Hydra runs, so that a mistake is one line naming the problem and
the fix (exit status 2) instead of Hydra's multi-line report, or a sweep that runs the wrong thing.

Caught here: an unknown recipe, workload or collector; a mistyped or ill-typed option; a collector
key that does not exist (``+collector.x.typo=1``, which Hydra lets through); a bare word where an
override was expected (a command without ``--``); a recipe that needs a command and got none.
Sweep values (``a=1,2``, ``glob(*)``) and Hydra's own settings are left to Hydra: they are
checked when each job is composed.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from aorta_core.settings import CoreSettings, SettingsError, core_settings

#: Flags that replace the primary config; with them the pre-check cannot compose what Hydra will.
_PRIMARY_FLAGS = ("--config-path", "-cp", "--config-name", "-cn")
_DIR_FLAGS = ("--config-dir", "-cd")
#: Hydra flags followed by a value that is not an override.
_VALUE_FLAGS = (*_PRIMARY_FLAGS, *_DIR_FLAGS, "--cfg", "-c", "--package", "-p", "--info", "-i",
                "--experimental-rerun")
_HELP = " (python -m aorta_core --help lists recipes, workloads and collectors)"


class UsageError(ValueError):
    """The command line cannot make a sweep; the message is the one line to show."""


@dataclass(frozen=True)
class Plan:
    """What the driver needs from the composed config."""

    allow_failures: bool = False


def _one_line(exc: BaseException) -> str:
    lines = []
    for part in (exc, exc.__cause__):
        if part is None:
            continue
        for line in str(part).splitlines():
            line = line.strip()
            if line.startswith("Config search path"):
                break
            if line and not line.startswith("provider=") and line not in lines:
                lines.append(line)
    head = next((i for i, line in enumerate(lines) if line.endswith(":")), len(lines))
    text = "; ".join(lines[: head + 1])
    if head < len(lines) - 1:  # "Available options in 'sweep':" then one option per line
        text += " " + ", ".join(lines[head + 1 :])
    return text + _HELP


def _bare_word(args: list[str]) -> None:
    for i, arg in enumerate(args):
        if arg.startswith("-") or "=" in arg or (i and args[i - 1] in _VALUE_FLAGS):
            continue
        before = shlex.join(args[:i]) or "sweep=repeat"
        raise UsageError(
            f"{arg!r} is not an override (key=value): put the workload command after `--`, "
            f"e.g. python -m aorta_core {before} -- {shlex.join(args[i:])}"
        )


#: Where cells are written is aorta's: ``output=<dir>`` decides, Hydra's keys must not.
_OWNED = ("hydra.sweep.dir", "hydra.sweep.subdir", "hydra.run.dir")


def _owned_keys(args: list[str]) -> None:
    for arg in args:
        if arg.lstrip("+~").split("=", 1)[0] in _OWNED:
            raise UsageError(f"{arg.split('=', 1)[0]} is set by aorta (cells go to "
                             "<output>/cells/<cell>); choose the folder with output=<dir>")


def _search_dirs(args: list[str]) -> list[str]:
    """``--config-dir D`` / ``-cd D`` / ``--config-dir=D`` as the search path Hydra will add."""
    dirs = []
    for i, arg in enumerate(args):
        if arg in _DIR_FLAGS and i + 1 < len(args):
            dirs.append(args[i + 1])
        elif arg.startswith(tuple(f"{f}=" for f in _DIR_FLAGS)):
            dirs.append(arg.split("=", 1)[1])
    return [f"file://{Path(d).resolve()}" for d in dirs]


def _collector_keys(cfg: DictConfig) -> None:
    from aorta_core.plugins import load_registry

    registry = load_registry()
    for name, node in (cfg.get("collector") or {}).items():
        collector = registry.collectors.get(name)
        if collector is None:
            continue
        known = {f.name for f in dataclasses.fields(collector.info.options)}
        unknown = sorted(set(node) - known)
        if unknown:
            raise UsageError(f"collector.{name}.{unknown[0]} is not an option of {name}; "
                             f"valid: {', '.join(sorted(known))}")


def _command_given(settings: CoreSettings, args: list[str], command: list[str] | None) -> None:
    if not settings.requires_command or command is not None:
        return
    if any(a.split("=", 1)[0].lstrip("+~") in ("workload", "command") for a in args):
        return
    recipe = next((a.split("=", 1)[1] for a in args if a.startswith("sweep=")), "this recipe")
    raise UsageError(
        f"sweep={recipe} runs the command after `--`, and none was given: "
        f"python -m aorta_core sweep={recipe} -- python train.py (or name one: workload=benchmark)"
    )


def check(args: list[str], command: list[str] | None) -> Plan:
    """Compose ``args`` as Hydra will; raise :class:`UsageError` with the reason it cannot run."""
    _bare_word(args)
    _owned_keys(args)
    if any(a in _PRIMARY_FLAGS or a.startswith(_PRIMARY_FLAGS) for a in args):
        return Plan(allow_failures=any(a in ("allow_failures=true", "allow_failures=True")
                                       for a in args))
    from hydra.core.override_parser.overrides_parser import OverridesParser

    candidates = [a for a in args if "=" in a and not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(candidates)
    except HydraException as exc:
        raise UsageError(_one_line(exc)) from None
    plain = [o.input_line for o in parsed
             if not o.is_sweep_override() and not o.is_hydra_override()]
    dirs = _search_dirs(args)
    if dirs:
        plain.append(f"hydra.searchpath=[{','.join(dirs)}]")
    try:
        with initialize_config_module("aorta_core.conf", version_base="1.3"):
            cfg = compose("config", overrides=plain)
    except (HydraException, OmegaConfBaseException) as exc:
        raise UsageError(_one_line(exc)) from None
    try:
        settings = core_settings(cfg)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    _collector_keys(cfg)
    _command_given(settings, args, command)
    return Plan(allow_failures=settings.allow_failures)
