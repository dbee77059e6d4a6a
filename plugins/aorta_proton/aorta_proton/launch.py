"""Which Python runs a launch, and what of a Python launch Proton's command line can run.

``mode: cli`` can run only what Proton's CLI runs: ``python [flags] script.py args``,
``pytest args`` and ``python -m pytest args`` (run as ``pytest``). Everything else needs
``mode: env``, and the messages say so; ``mode: auto`` takes env for a workload known to open
``aorta_core.payload.session()``, where Proton's payload session measures it, and cli for any
other. Launches are split by ``aorta_core.api.split_python``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from aorta_core.api import PythonLaunch, SetupError, split_python
from aorta_core.api import interpreter as launch_interpreter

#: Interpreter flags that change nothing Proton depends on; kept in front of ``-m``.
_FLAG_LETTERS = re.compile(r"-[uBEsSOIbq]+$")
#: Interpreter options that take a value (``-X dev`` / ``-Xdev``, ``-W error`` / ``-Werror``).
_VALUED = ("-X", "-W")
#: Modules known to open ``aorta_core.payload.session()``: the built-in benchmark.
SESSION_MODULES = ("aorta_core.benchmark",)
_NEEDS_ENV = (
    "use collector.proton.mode: env and start Proton in the payload (aorta_core.payload.session)"
)


def interpreter(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """``$AORTA_PROTON_PYTHON``, else the launch's Python (its own, or a console script's)."""
    return env.get("AORTA_PROTON_PYTHON") or launch_interpreter(argv, env)


def attach_mode(mode: str, argv: Sequence[str]) -> str:
    """``mode``; ``auto`` becomes ``env`` when the launch runs a module of
    :data:`SESSION_MODULES` (with python or torchrun), else ``cli``."""
    if mode != "auto":
        return mode
    python = split_python(argv)
    opens = python is not None and python.kind == "module" and python.target in SESSION_MODULES
    return "env" if opens else "cli"


#: How the messages name the mode that ran the launch under Proton's command line.
CLI = "mode: cli"
AUTO_CLI = "mode: auto, cli for anything but the built-in benchmark"


def cli_target(argv: Sequence[str], said: str = CLI) -> PythonLaunch:
    """The launch as Proton's CLI can run it (a script, or ``pytest`` as the script), or raise;
    ``said``: how the messages name the mode."""
    if not argv:
        raise SetupError("collector proton: the command is empty; give a Python script after --")
    if os.path.basename(argv[0]) == "pytest":
        return PythonLaunch(argv[0], kind="script", target="pytest", args=tuple(argv[1:]))
    python = split_python(argv)
    if python is None or python.launcher == "torchrun":
        raise SetupError(
            f"collector proton ({said}) runs only `python script.py` or pytest, not "
            f"{os.path.basename(argv[0])!r}: {_NEEDS_ENV}"
        )
    for option in python.python_options:
        if not (_FLAG_LETTERS.match(option[0]) or option[0][:2] in _VALUED):
            raise _cannot_keep(option[0], said)
    if python.launcher != "python" or (python.kind == "module" and python.target != "pytest"):
        module = python.launcher if python.launcher != "python" else python.target
        raise SetupError(
            f"collector proton ({said}) cannot run `-m {module or '<nothing>'}`: "
            f"Proton's command line runs a script file or pytest only; {_NEEDS_ENV}"
        )
    if python.kind in ("code", "stdin"):
        raise _cannot_keep("-c" if python.kind == "code" else "-", said)
    if python.kind == "none":
        raise SetupError(
            f"collector proton ({said}): the Python launch names no script; "
            "give `python script.py ...` after --"
        )
    return PythonLaunch(python.program, python_options=python.python_options, kind="script",
                        target=python.target, args=python.args)


def _cannot_keep(token: str, said: str) -> SetupError:
    return SetupError(
        f"collector proton ({said}) cannot keep the interpreter option {token!r} "
        f"(Proton's command line runs a script file or pytest only); {_NEEDS_ENV}"
    )
