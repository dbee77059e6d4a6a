"""Value types shared by the core and every collector plugin.

They are the vocabulary of the hook contract in :mod:`aorta_core.hookspecs`, kept free of heavy
imports so that a plugin can import them at no cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class SetupError(Exception):
    """The collector cannot take this measurement; the trial becomes a setup error.

    The message is one line that names the problem and the fix (e.g. which variable to set).
    """


class OptionError(ValueError):
    """A collector option (or a combination of collectors) is invalid.

    Raised while the config is validated, before anything runs. The message names the key.
    """


@dataclass(frozen=True)
class Launch:
    """One process launch: what is executed, with which environment, where.

    ``env`` is the complete environment of the child. Collectors return a new ``Launch``
    (``dataclasses.replace``) instead of mutating the one they were given.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


@dataclass(frozen=True)
class CollectorInfo:
    """What the core needs to know about a collector before it runs anything."""

    description: str
    #: A dataclass whose fields are the collector's options and whose defaults are its defaults.
    options: type
    #: Importable package holding ``collector/<name>.yaml`` (e.g. ``"aorta_rocprof.conf"``).
    config_package: str
    #: Smaller wraps further outside: rocprof 10, proton 20, torchprof 30; others pick theirs.
    wrap_order: int = 50
    #: False when the profiler changes what it times (Nsight Compute serialises and replays every
    #: kernel): cross-collector checks such as ``sweep=agree`` mark its times as not comparable
    #: with the tracing collectors' instead of comparing them.
    times_comparable: bool = True


@dataclass(frozen=True)
class TrialRun:
    """What happened when the wrapped launch ran; handed to ``collect_artifacts``."""

    launch: Launch
    returncode: int | None
    timed_out: bool
    stdout_path: Path
    stderr_path: Path
