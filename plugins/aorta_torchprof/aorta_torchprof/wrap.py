"""Rewrite a launch so the payload runs under the runner (wrap mode) or only hand over the
options (env mode).

Accepted launches: ``python [flags] script.py ...``, ``python [flags] -m module ...``,
``torchrun [opts] script.py ...`` and ``python -m torch.distributed.run [opts] script.py ...``
(also with torchrun's ``-m module``). torchrun gets ``-m aorta_torchprof.runner`` so that every
rank it spawns runs the payload under its own profiler.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from aorta_core import Launch, SetupError
from aorta_torchprof.options import TorchprofOptions
from aorta_torchprof.session import options_to_env

RUNNER = "aorta_torchprof.runner"
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
#: Interpreter options that consume the next token (``-X dev``, ``-W error``).
_PY_VALUE_FLAGS = frozenset({"-X", "-W"})
#: torchrun options that take no value (torch.distributed.run's store_true flags, torch 2.13).
TORCHRUN_FLAGS = frozenset(
    {
        "-h",
        "--help",
        "--standalone",
        "-m",
        "--module",
        "--no-python",
        "--no_python",
        "--run-path",
        "--run_path",
        "--virtual-local-rank",
        "--virtual_local_rank",
    }
)
_ENV_HINT = "or use collector.torchprof.mode=env for a workload that drives torch.profiler itself"


def wrap(launch: Launch, options: TorchprofOptions, artifact_dir: Path) -> Launch:
    """The launch rewritten for ``options.mode``, with the options handed over in its env."""
    env = {**launch.env, **options_to_env(options, artifact_dir)}
    if options.mode == "env":
        return replace(launch, env=env)
    argv = list(launch.argv)
    if not argv:
        raise SetupError(
            f"torchprof: the workload command is empty; give it after `--` {_ENV_HINT}"
        )
    exe = os.path.basename(argv[0])
    if exe == "torchrun":
        new = [argv[0], *_wrap_torchrun(argv[1:])]
        interpreter = _shebang_python(argv[0], env)
    elif _PYTHON.match(exe):
        new = [argv[0], *_wrap_python(argv[1:])]
        interpreter = argv[0]
    else:
        raise SetupError(
            f"torchprof cannot wrap {argv[0]!r}: only `python script.py`, `python -m module` and "
            f"`torchrun ... script.py` launches can run under torch.profiler; {_ENV_HINT}"
        )
    if interpreter is not None:
        _check_importable(interpreter, env, launch.cwd)
    return replace(launch, argv=tuple(new), env=env)


def _wrap_python(args: list[str]) -> list[str]:
    i = 0
    while i < len(args):
        token = args[i]
        if token == "-m":
            if i + 1 >= len(args):
                raise SetupError(f"torchprof: `python -m` without a module name; {_ENV_HINT}")
            if args[i + 1] == "torch.distributed.launch":
                raise SetupError(
                    "torchprof cannot wrap the deprecated torch.distributed.launch; use "
                    "`torchrun` or `python -m torch.distributed.run` instead"
                )
            if args[i + 1] == "torch.distributed.run":
                return [*args[: i + 2], *_wrap_torchrun(args[i + 2 :])]
            return [*args[:i], "-m", RUNNER, *args[i:]]
        if token in ("-c", "-") or token.startswith("-c"):
            raise SetupError(
                f"torchprof cannot wrap `python {token}`: the runner needs a script file or a "
                f"module; {_ENV_HINT}"
            )
        if not token.startswith("-"):
            return [*args[:i], "-m", RUNNER, *args[i:]]
        i += 2 if token in _PY_VALUE_FLAGS else 1
    raise SetupError(f"torchprof: the python launch names no script to profile; {_ENV_HINT}")


def _wrap_torchrun(args: list[str]) -> list[str]:
    """Insert ``-m aorta_torchprof.runner`` between torchrun's options and the payload."""
    i, module = 0, False
    opts: list[str] = []
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        token = args[i]
        name = token.split("=", 1)[0]
        if name in ("--no-python", "--no_python"):
            raise SetupError(
                "torchprof cannot wrap `torchrun --no-python`: the payload is not a Python "
                f"script; {_ENV_HINT}"
            )
        if name in ("-m", "--module"):
            module = True
        elif name in ("--run-path", "--run_path"):
            pass  # the runner already runs the script with runpy.run_path
        elif "=" in token or name in TORCHRUN_FLAGS:
            opts.append(token)
        else:
            opts.extend(args[i : i + 2])
            i += 1
        i += 1
    if i < len(args) and args[i] == "--":
        i += 1
    if i >= len(args):
        raise SetupError(f"torchprof: the torchrun launch names no training script; {_ENV_HINT}")
    payload = ["-m", args[i], *args[i + 1 :]] if module else args[i:]
    return [*opts, "-m", RUNNER, *payload]


def _shebang_python(torchrun: str, env: dict[str, str]) -> str | None:
    """The interpreter of a ``torchrun`` console script, when its shebang names one."""
    path = torchrun if os.sep in torchrun else shutil.which(torchrun, path=env.get("PATH"))
    try:
        with open(path or "", "rb") as handle:
            first = handle.readline().decode(errors="replace").strip()
    except OSError:
        return None
    parts = first[2:].split() if first.startswith("#!") else []
    if parts and os.path.basename(parts[0]) == "env":
        parts = parts[1:]
    return parts[0] if parts and _PYTHON.match(os.path.basename(parts[0])) else None


def _check_importable(interpreter: str, env: dict[str, str], cwd: Path) -> None:
    """Fail at setup, not mid-run, when the payload's Python cannot import the runner."""
    probe = (
        "import importlib.util, sys; sys.exit(importlib.util.find_spec('aorta_torchprof') is None)"
    )
    try:
        done = subprocess.run(
            [interpreter, "-c", probe], env=env, cwd=cwd, capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(
            f"torchprof: cannot run the workload's python {interpreter!r}: {exc}"
        ) from exc
    if done.returncode != 0:
        raise SetupError(
            f"torchprof: {interpreter!r} cannot import aorta_torchprof; install aorta-torchprof "
            f"into that environment (pip install aorta-torchprof) {_ENV_HINT}"
        )
