"""Which Python runs a launch, and how a Python launch splits for Proton's command line.

``mode: cli`` can run only what Proton's CLI runs: ``python [flags] script.py args``,
``pytest args`` and ``python -m pytest args`` (run as ``pytest``). Everything else needs
``mode: env``, and the messages say so.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence

from aorta_core import SetupError

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
#: Interpreter flags that change nothing Proton depends on; kept in front of ``-m``.
_FLAG_LETTERS = re.compile(r"-[uBEsSOIbq]+$")
#: Interpreter options that take a value (``-X dev`` / ``-Xdev``, ``-W error`` / ``-Werror``).
_VALUED = ("-X", "-W")
_NEEDS_ENV = "use collector.proton.mode: env and start Proton in the payload (aorta_proton.payload)"


def is_python(token: str) -> bool:
    return bool(_PYTHON.match(os.path.basename(token)))


def _which(token: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(token, path=env.get("PATH", os.defpath))


def _shebang_python(script: str, env: Mapping[str, str]) -> str | None:
    """The interpreter named by a console script's first lines (``#!`` or pip's sh trampoline)."""
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
        return _which(words[0], env) if words and is_python(words[0]) else None
    if words and os.path.basename(words[0]) == "sh" and len(head) > 1:
        trampoline = re.match(r"'''exec' \"?([^\" ]+)", head[1])
        return trampoline[1] if trampoline and is_python(trampoline[1]) else None
    return words[0] if words and is_python(words[0]) else None


def interpreter(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """``$AORTA_PROTON_PYTHON``, else the launch's Python (its own, or a console script's)."""
    if env.get("AORTA_PROTON_PYTHON"):
        return env["AORTA_PROTON_PYTHON"]
    if not argv:
        return None
    if is_python(argv[0]):
        return argv[0] if os.sep in argv[0] else _which(argv[0], env) or argv[0]
    script = argv[0] if os.sep in argv[0] else _which(argv[0], env)
    return _shebang_python(script, env) if script else None


def split_python(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split a launch into (interpreter flags, Proton target) or raise :class:`SetupError`."""
    if not argv:
        raise SetupError("collector proton: the command is empty; give a Python script after --")
    if os.path.basename(argv[0]) == "pytest":
        return [], ["pytest", *argv[1:]]
    if not is_python(argv[0]):
        raise SetupError(
            f"collector proton (mode: cli) runs only `python script.py` or pytest, not "
            f"{os.path.basename(argv[0])!r}: {_NEEDS_ENV}"
        )
    flags: list[str] = []
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        token = rest.pop(0)
        if _FLAG_LETTERS.match(token):
            flags.append(token)
        elif token in _VALUED and rest:
            flags += [token, rest.pop(0)]
        elif token[:2] in _VALUED and len(token) > 2:
            flags.append(token)
        elif token.startswith("-m"):
            module = token[2:] or (rest.pop(0) if rest else "")
            if module == "pytest":
                return flags, ["pytest", *rest]
            raise SetupError(
                f"collector proton (mode: cli) cannot run `-m {module or '<nothing>'}`: "
                f"Proton's command line runs a script file or pytest only; {_NEEDS_ENV}"
            )
        else:
            raise SetupError(
                f"collector proton (mode: cli) cannot keep the interpreter option {token!r} "
                f"(Proton's command line runs a script file or pytest only); {_NEEDS_ENV}"
            )
    if not rest:
        raise SetupError(
            "collector proton (mode: cli): the Python launch names no script; "
            "give `python script.py ...` after --"
        )
    return flags, rest
