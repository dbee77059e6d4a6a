"""Value types shared by the core and every collector plugin.

They are the vocabulary of the hook contract in :mod:`aorta_core.api.hookspecs`, kept free of heavy
imports so that a plugin can import them at no cost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import pluggy

#: Marks a collector's hook implementations (``@hookimpl``), for pluggy project ``"aorta"``.
hookimpl = pluggy.HookimplMarker("aorta")


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


def _text_problem(where: str, value: object) -> str | None:
    """Why ``value`` cannot be one argument, name or value of an ``execve``, or ``None``."""
    if not isinstance(value, str):
        shown = "None" if value is None else f"{type(value).__name__} {repr(value)[:40]}"
        return f"{where} is {shown} (must be str)"
    try:
        encoded = os.fsencode(value)
    except UnicodeEncodeError:
        return f"{where} cannot be encoded for the operating system ({repr(value)[:40]})"
    return f"{where} contains a NUL byte" if b"\0" in encoded else None


def _env_problems(env: Mapping) -> Iterator[str | None]:
    for name, text in env.items():
        where = f"env[{repr(name)[:40]}]"
        yield _text_problem(f"the name of {where}", name)
        if isinstance(name, str) and ("=" in name or not name):
            yield f"the name of {where} is empty or contains '='"
        yield _text_problem(where, text)


def launch_problem(value: Launch) -> str | None:
    """Why ``value`` cannot be started, in a few words, or ``None``.

    A collector's ``wrap_argv`` result is checked here before anything runs, so a malformed
    launch (an argument that is not text, a NUL byte, ``=`` in a variable name) becomes that
    trial's setup error instead of a traceback from ``subprocess`` that ends the sweep. Items
    are ``str`` only: ``bytes`` and ``os.PathLike`` items, which ``subprocess`` would take, are
    refused too, because the record shows the argv as text. A plugin's object that fails while it
    is read (a mapping whose ``items()`` raises, a path whose ``__fspath__`` does) is a problem
    too, never an exception.
    """
    try:
        return _first_problem(value)
    except Exception as exc:  # the plugin's own objects run code when read (even str(exc) may)
        return f"cannot be read ({type(exc).__name__} raised while reading it)"


def _first_problem(value: Launch) -> str | None:
    if not isinstance(value.argv, tuple | list):
        return f"argv is {type(value.argv).__name__} (must be a tuple of str)"
    if not value.argv:
        return "argv is empty (must name a program)"
    if not isinstance(value.env, Mapping):
        return f"env is {type(value.env).__name__} (must be a mapping of str to str)"
    if not isinstance(value.cwd, str | os.PathLike):
        return f"cwd is {type(value.cwd).__name__} (must be a path)"
    problems = chain((_text_problem(f"argv[{i}]", a) for i, a in enumerate(value.argv)),
                     _env_problems(value.env), [_text_problem("cwd", os.fspath(value.cwd))])
    return next((p for p in problems if p), None)


@dataclass(frozen=True)
class CollectorInfo:
    """What the core needs to know about a collector before it runs anything."""

    description: str
    #: A dataclass whose fields are the collector's options and whose defaults are its defaults.
    options: type
    #: Importable package holding ``collector/<name>.yaml`` (e.g. ``"aorta_rocprof.conf"``), for
    #: a collector that ships its Hydra option as YAML (presets); ``None``: the core generates
    #: ``collector/<name>`` from ``options``, its defaults the dataclass's.
    config_package: str | None = None
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


@dataclass(frozen=True)
class Claim:
    """Something a collector holds while it measures (``resource_claims``), so that the core can
    refuse collectors that cannot measure together without knowing any of them by name.

    Two collectors conflict when they claim the same ``resource`` and either claims it
    ``exclusive``. Resource names are shared vocabulary: ``gpu-kernels`` (the kernels as they
    run: a tracer times them, a replaying profiler owns them) and ``hsa-queues`` (AMD's HSA
    queues, which one interceptor at a time can hold); a new name needs no change in the core.
    """

    resource: str
    exclusive: bool = False
    #: One clause for the refusal: what this collector does with the resource, and how to keep it
    #: beside others if an option can (``"backend 'auto' intercepts them; ..."``).
    why: str = ""


class PayloadSession(Protocol):
    """What ``payload_session`` returns: a collector's measurement inside the workload process."""

    def start(self) -> None: ...

    def step(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class TimelineSource:
    """A trace file a collector contributes to the trial's merged timeline (``timeline_sources``).

    The core reads Chrome Trace Event files; how it places one on the trial's clock is ``clock``.
    Its lanes are named ``rank <R> · <collector> <process>``, where a process is named by the
    file's ``process_name`` metadata, else ``pid <P>`` (a file without pids: its file name).
    """

    #: The file, inside the trial's folder (a relative path counts from ``artifact_dir``).
    path: Path
    #: ``"unix"``: ``ts`` in µs on Unix time (after ``baseTimeNanoseconds`` where the file has
    #: it, as Kineto writes); ``"relative"``: times count from the trace's own start, and the core
    #: centres the trace in ``span``, stating half the slack as its bound.
    clock: str
    #: The rank the file belongs to; ``None``: read from the file (Kineto's
    #: ``distributedInfo.rank``, else a ``rank<N>`` in its name or a folder's inside the trial).
    rank: int | None = None
    #: ``"relative"`` only: the interval the trace must lie in: ``"iterations"`` (the built-in
    #: benchmark's iterations of that rank, else the run) or ``"run"`` (the trial's run).
    span: str = "run"
    #: ``"unix"`` only: how far (ms) this clock may be from ``time.time_ns()`` on the same host.
    error_bound_ms: float = 0.0
    #: The name of a lane (an integer ``tid``) the file leaves unnamed; ``{tid}`` is its tid
    #: (Proton's tids are GPU streams: ``"stream {tid}"``).
    thread_name: str = "thread {tid}"
    #: ``"relative"`` only: clock marks, ``(event name, not before, not after)`` with Unix ns:
    #: the k-th mark of a name is the k-th event of that name in the trace (by ``ts``), which ran
    #: within that wall-clock window (the collector stamped ``time.time_ns()`` around it, the
    #: device synchronized on both sides). The core then places the trace where every mark fits
    #: its window, the half-width of the offsets that fit being the bound, instead of centring it
    #: in ``span``; two marks far apart also check that the trace's clock ran at the wall
    #: clock's rate (``otherData.clock_checks``).
    marks: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class ReportSection:
    """A part of the sweep's report that a collector contributes (``report_sections``): shown in
    report.html and perf.md after the core's own sections, under the collector's name."""

    title: str
    #: Plain text (never markup): what the section says, a paragraph per line.
    text: str = ""
    columns: Sequence[str] = ()
    #: Table rows, one value per column; numbers are formatted by the core.
    rows: Sequence[Sequence[Any]] = ()


#: What a :class:`KernelRow` times: a kernel on a device, or a CPU operator (its self time).
KERNEL_KINDS = ("gpu_kernel", "cpu_op")


@dataclass(frozen=True)
class KernelRow:
    """One row of a trial's kernel and op table (``kernel_table``): a kernel's (or CPU op's)
    calls and total time, in one profiled step or (``step=None``) the whole capture."""

    #: As the profiler printed it (mangled names are demangled by the core).
    name: str
    calls: int
    total_ms: float
    #: One of :data:`KERNEL_KINDS`.
    kind: str
    #: The profiler step (``ProfilerStep#N``'s N); ``None`` where the capture has no steps.
    step: int | None = None


@dataclass(frozen=True)
class Command:
    """An ``aorta <name>`` command a collector adds (``aorta_commands``)."""

    #: One line for ``aorta --help``.
    help: str
    #: Runs the command with the arguments after its name; returns the exit status.
    main: Callable[[list[str]], int]
