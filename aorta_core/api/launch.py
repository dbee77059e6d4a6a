"""Split and rebuild Python launches, so a collector can run every Python process under its module.

:func:`split_python` reads ``python [options] (script | -m module | -c code | -) args``,
``torchrun [options] (script | -m module | --no-python program) args`` and
``python [options] -m torch.distributed.run [options] ...`` into a :class:`PythonLaunch`;
:meth:`PythonLaunch.rebuild` writes it back with a wrapper (``-m your.runner ...``) in front of
the target, once per process that torchrun starts. :func:`interpreter` finds the Python that
runs a launch; :func:`run_main` runs the target inside a runner as ``python`` would, and
:func:`exit_without_teardown` ends that runner with the target's status.
"""

from __future__ import annotations

import atexit
import os
import re
import runpy
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
#: Interpreter option letters that take a value (``-W error`` / ``-Werror``, ``-X dev``).
_VALUED = "WX"
#: Interpreter option letters that end the options: the code or module follows.
_TARGET = {"c": "code", "m": "module"}
#: torchrun's options that take no value (``torch.distributed.run``'s store_true flags).
TORCHRUN_FLAGS = frozenset({
    "-h", "--help", "--standalone", "-m", "--module", "--no-python", "--no_python",
    "--run-path", "--run_path", "--virtual-local-rank", "--virtual_local_rank",
})
_TORCHRUN_MODULE = "torch.distributed.run"


@dataclass(frozen=True)
class PythonLaunch:
    """One Python launch, split; tokens are kept as given."""

    #: ``argv[0]``: the interpreter, or the ``torchrun`` console script.
    program: str
    #: ``python``, ``torchrun`` or ``torch.distributed.run`` (``python -m torch.distributed.run``).
    launcher: str = "python"
    #: The interpreter's options, one tuple per option with its value: ``("-u",), ("-X", "dev")``.
    python_options: tuple[tuple[str, ...], ...] = ()
    #: torchrun's options, without ``-m``/``--module``, ``--no-python`` and ``--run-path``.
    launcher_options: tuple[str, ...] = ()
    #: ``script``, ``module``, ``code`` (``-c``), ``stdin`` (``-``), ``program`` (torchrun
    #: ``--no-python``) or ``none`` (the launch names no target).
    kind: str = "none"
    #: The script, module, code or program ("" for ``stdin``, ``none`` or a bare ``-m``).
    target: str = ""
    #: The target's own arguments.
    args: tuple[str, ...] = ()

    @property
    def python_flags(self) -> tuple[str, ...]:
        """The interpreter's options as argv tokens."""
        return tuple(token for option in self.python_options for token in option)

    def rebuild(self, *wrapper: str) -> tuple[str, ...]:
        """The launch as argv, with ``wrapper`` (e.g. ``"-m", "my.runner"``) in front of the target.

        The wrapper then gets the target as its arguments (``script args`` or ``-m module args``);
        under torchrun every rank runs it. Without a wrapper this is the launch itself.
        """
        if wrapper and self.kind in ("program", "none"):
            raise ValueError(f"a launch with a {self.kind!r} target has no Python to wrap")
        head = [self.program, *self.python_flags]
        if self.launcher == _TORCHRUN_MODULE:
            head += ["-m", _TORCHRUN_MODULE]
        head += self.launcher_options
        target = {"script": [self.target], "module": ["-m", self.target],
                  "code": ["-c", self.target], "stdin": ["-"],
                  "program": ["--no-python", self.target], "none": []}[self.kind]
        return (*head, *wrapper, *target, *self.args)


def _is_python(token: str) -> bool:
    """Whether ``token`` names a Python interpreter (``python``, ``python3``, ``/x/python3.12``)."""
    return bool(_PYTHON.match(os.path.basename(token)))


def split_python(argv: Sequence[str]) -> PythonLaunch | None:
    """``argv`` split, or ``None`` when it is not a Python, torchrun or empty launch."""
    if not argv:
        return None
    program, rest = argv[0], list(argv[1:])
    if os.path.basename(program) == "torchrun":
        return _split_torchrun(PythonLaunch(program, "torchrun"), rest)
    if not _is_python(program):
        return None
    options, kind, target, rest = _split_interpreter(rest)
    if kind == "module" and target == _TORCHRUN_MODULE:
        return _split_torchrun(PythonLaunch(program, _TORCHRUN_MODULE, options), rest)
    return PythonLaunch(program, "python", options, (), kind, target, tuple(rest))


def _split_interpreter(
        tokens: list[str]) -> tuple[tuple[tuple[str, ...], ...], str, str, list[str]]:
    """(options, kind, target, args) of the words after ``python``, as Python's getopt reads
    them: grouped letters (``-uB``), values attached or next (``-Wignore``, ``-X dev``)."""
    options: list[tuple[str, ...]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-":
            return tuple(options), "stdin", "", tokens[i + 1:]
        if token == "--" or not token.startswith("-"):
            j = i + 1 if token == "--" else i
            if j >= len(tokens):
                break
            return tuple(options), "script", tokens[j], tokens[j + 1:]
        if token.startswith("--"):
            valued = token == "--check-hash-based-pycs"
            options.append(tuple(tokens[i:i + 2]) if valued else (token,))
            i += 2 if valued else 1
            continue
        letters = token[1:]
        for k, letter in enumerate(letters):
            if letter in _TARGET:
                if k:
                    options.append((f"-{letters[:k]}",))
                attached = letters[k + 1:]
                value = attached or (tokens[i + 1] if i + 1 < len(tokens) else "")
                rest = tokens[i + 1:] if attached else tokens[i + 2:]
                return tuple(options), _TARGET[letter], value, rest
            if letter in _VALUED:
                takes_next = k == len(letters) - 1
                options.append(tuple(tokens[i:i + 2]) if takes_next else (token,))
                i += 1 if takes_next else 0
                break
        else:
            options.append((token,))
        i += 1
    return tuple(options), "none", "", []


def _split_torchrun(launch: PythonLaunch, tokens: list[str]) -> PythonLaunch:
    """torchrun's options, then the training script (or module, or program) and its args."""
    options: list[str] = []
    kind = "script"
    i = 0
    while i < len(tokens) and tokens[i].startswith("-") and tokens[i] != "--":
        token = tokens[i]
        name = token.split("=", 1)[0]
        if name in ("-m", "--module"):
            kind = "module"
        elif name in ("--no-python", "--no_python"):
            kind = "program"
        elif name in ("--run-path", "--run_path"):
            pass  # a script runs through runpy.run_path either way
        elif "=" in token or name in TORCHRUN_FLAGS:
            options.append(token)
        else:
            options.extend(tokens[i:i + 2])
            i += 1
        i += 1
    if i < len(tokens) and tokens[i] == "--":
        i += 1
    if i >= len(tokens):
        kind = "none"
    target, args = (tokens[i], tuple(tokens[i + 1:])) if kind != "none" else ("", ())
    return PythonLaunch(launch.program, launch.launcher, launch.python_options, tuple(options),
                        kind, target, args)


def interpreter(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The Python that runs ``argv``: its own interpreter, or a console script's (``torchrun``).

    Looked up on the launch's ``PATH``; a console script's interpreter is read from its first
    lines (``#!/x/python``, ``#!/usr/bin/env python3`` or pip's ``/bin/sh`` trampoline).
    """
    if not argv:
        return None
    if _is_python(argv[0]):
        return argv[0] if os.sep in argv[0] else _which(argv[0], env) or argv[0]
    script = argv[0] if os.sep in argv[0] else _which(argv[0], env)
    return _shebang_python(script, env) if script else None


def _which(token: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(token, path=env.get("PATH", os.defpath))


def _shebang_python(script: str, env: Mapping[str, str]) -> str | None:
    try:
        with open(script, "rb") as handle:
            head = handle.read(1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return _which(words[0], env) if words and _is_python(words[0]) else None
    if words and os.path.basename(words[0]) == "sh" and len(head) > 1:
        trampoline = re.match(r"'''exec' \"?([^\" ]+)", head[1])
        return trampoline[1] if trampoline and _is_python(trampoline[1]) else None
    return words[0] if words and _is_python(words[0]) else None


#: How many :func:`run_main` calls are running a payload in this process.
_payloads_running = 0


def run_main(target: Sequence[str]) -> None:
    """Run ``script.py args`` or ``-m module args`` in this process as ``python`` runs its main.

    For a runner started as ``python -m my.runner <target>``: ``sys.argv`` and ``sys.path[0]``
    become what ``python <target>`` would give the payload. Exceptions (``SystemExit``
    included) propagate to the runner.
    """
    global _payloads_running
    _payloads_running += 1
    try:
        if target[0] == "-m":
            sys.argv = list(target[1:])
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
            return
        sys.argv = list(target)
        if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated):
            sys.path[0] = os.path.dirname(os.path.abspath(target[0]))
        runpy.run_path(target[0], run_name="__main__")
    finally:
        _payloads_running -= 1


def exit_status(exc: SystemExit) -> int:
    """The status a process ends with after ``exc``, as the interpreter maps it: ``None`` is
    0, an int itself, anything else is printed to stderr and is 1. For a runner that catches the
    payload's ``SystemExit`` to finish its own work first."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def exit_without_teardown(status: int) -> None:
    """Run the atexit handlers, flush stdout and stderr, and end the process with ``status``
    without the interpreter's teardown of C++ static objects. With torch 2.13 a gloo job aborts
    now and then in that teardown, after all its work and files are done ("terminate called
    without an active exception", SIGABRT: one exit in four of profiled ranks once), which would
    turn a finished run into a failed one. Called by a payload that a runner runs
    (:func:`run_main`), it raises ``SystemExit(status)`` instead: the runner still has its own
    work to finish (stopping a profiler, writing its files) and ends the process itself."""
    if _payloads_running:
        raise SystemExit(status)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
