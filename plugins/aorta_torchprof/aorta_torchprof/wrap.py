"""Rewrite a launch so the payload runs under the runner (wrap mode) or only hand over the
options (env mode).

Accepted launches: ``python [flags] script.py ...``, ``python [flags] -m module ...``,
``torchrun [opts] script.py ...`` and ``python -m torch.distributed.run [opts] script.py ...``
(also with torchrun's ``-m module``), split and rebuilt by ``aorta_core.api.split_python``. torchrun
gets ``-m aorta_torchprof.runner`` so that every rank it spawns runs the payload under its own
profiler.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from aorta_core.api import Launch, PythonLaunch, SetupError, interpreter, pip_install, split_python
from aorta_torchprof.options import TorchprofOptions
from aorta_torchprof.session import options_to_env

RUNNER = "aorta_torchprof.runner"
_ENV_HINT = "or use collector.torchprof.mode=env for a workload that drives torch.profiler itself"


def wrap(launch: Launch, options: TorchprofOptions, artifact_dir: Path) -> Launch:
    """The launch rewritten for ``options.mode``, with the options handed over in its env."""
    env = {**launch.env, **options_to_env(options, artifact_dir)}
    if options.mode == "env":
        return replace(launch, env=env)
    if not launch.argv:
        raise SetupError(
            f"torchprof: the workload command is empty; give it after `--` {_ENV_HINT}"
        )
    python = split_python(launch.argv)
    if python is None:
        raise SetupError(
            f"torchprof cannot wrap {launch.argv[0]!r}: only `python script.py`, "
            "`python -m module` and `torchrun ... script.py` launches can run under "
            f"torch.profiler; {_ENV_HINT}"
        )
    _refuse_unprofilable(python)
    found = interpreter(launch.argv, env)
    if found is not None:
        _check_importable(found, env, launch.cwd)
    return replace(launch, argv=python.rebuild("-m", RUNNER), env=env)


def _refuse_unprofilable(python: PythonLaunch) -> None:
    """Raise :class:`SetupError` unless the runner can run the launch's target."""
    if python.kind == "program":
        raise SetupError(
            "torchprof cannot wrap `torchrun --no-python`: the payload is not a Python "
            f"script; {_ENV_HINT}"
        )
    if python.kind in ("code", "stdin"):
        token = "-c" if python.kind == "code" else "-"
        raise SetupError(
            f"torchprof cannot wrap `python {token}`: the runner needs a script file or a "
            f"module; {_ENV_HINT}"
        )
    if python.kind == "module" and not python.target:
        raise SetupError(f"torchprof: `python -m` without a module name; {_ENV_HINT}")
    if python.kind == "module" and python.target == "torch.distributed.launch":
        raise SetupError(
            "torchprof cannot wrap the deprecated torch.distributed.launch; use "
            "`torchrun` or `python -m torch.distributed.run` instead"
        )
    if python.kind == "none" and python.launcher == "python":
        raise SetupError(f"torchprof: the python launch names no script to profile; {_ENV_HINT}")
    if python.kind == "none":
        raise SetupError(f"torchprof: the torchrun launch names no training script; {_ENV_HINT}")


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
            "into that environment "
            f"({pip_install(interpreter, 'aorta-core', 'aorta-torchprof')}) {_ENV_HINT}"
        )
