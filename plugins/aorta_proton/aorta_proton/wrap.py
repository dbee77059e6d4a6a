"""Rewrite a launch so that Proton measures it (``mode: cli``) or can be started (``mode: env``);
``mode: auto`` picks one for the launch and notes which in the artifact folder."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from aorta_core.api import Launch, SetupError, pip_install, read_limited
from aorta_proton import devices, launch, triton_version
from aorta_proton.options import ProtonOptions, pinned_tracer_problem, render_mode

RUNNER = "aorta_proton.cli_runner"
#: File stem Proton writes to inside the artifact folder (``proton.hatchet`` ...).
PROFILE_STEM = "proton"
#: What ``mode: auto`` chose for the trial (``cli`` or ``env``), in its artifact folder.
MODE_FILE = "attach-mode.txt"


def read_note(artifact_dir: Path, name: str) -> str | None:
    """The one-line note ``name`` that aorta or the payload left in the artifact folder, or
    ``None`` when there is none (read as every artifact is: a regular file inside, bounded)."""
    try:
        text = read_limited(Path(artifact_dir) / name, Path(artifact_dir), 4096)
    except OSError:  # absent, or refused (FileRefused): not a note aorta reads
        return None
    return " ".join(text.decode(errors="replace").split())


def attached_mode(options: ProtonOptions, artifact_dir: Path) -> str:
    """The mode a trial ran in: its option, or what ``auto`` chose (``cli`` if unnoted)."""
    if options.mode != "auto":
        return options.mode
    return "env" if read_note(artifact_dir, MODE_FILE) == "env" else "cli"


def _environment(launch_: Launch, options: ProtonOptions) -> dict[str, str]:
    """The child's environment: stale ``AORTA_PROTON_*`` dropped (the user's
    ``AORTA_PROTON_PYTHON`` and ``AORTA_PROTON_GPU_CHECK`` kept), AMD devices translated."""
    env = {
        k: v
        for k, v in launch_.env.items()
        if not k.startswith("AORTA_PROTON_") or k in ("AORTA_PROTON_PYTHON", devices.CHECK_ENV)
    }
    if env.get("TRITON_PROTON_DISABLE", "").strip().lower() in ("1", "true", "on", "yes"):
        raise SetupError(
            "TRITON_PROTON_DISABLE is set, so Proton would record nothing: unset it for this cell"
        )
    if devices.intercepts_queues(options.backend, env):
        env, note = devices.translate(env)
        if note:
            warnings.warn(note, stacklevel=2)
    return env


def _checked_python(launch_: Launch, env: dict[str, str], options: ProtonOptions) -> str:
    python = launch.interpreter(launch_.argv, env)
    if python is None:
        what = launch_.argv[0] if launch_.argv else "an empty command"
        raise SetupError(
            f"collector proton: cannot tell which Python runs {what!r}; "
            "set AORTA_PROTON_PYTHON to the workload's interpreter"
        )
    found = triton_version.probe(python, env)
    triton_version.require(found, options)
    if options.mode == "cli" and not found.has_runner:
        raise SetupError(
            f"aorta-proton is not installed in the workload interpreter {python}: "
            f"run `{pip_install(python, 'aorta-core', 'aorta-proton')}`, "
            "or use collector.proton.mode: env"
        )
    return python


def proton_flags(options: ProtonOptions, artifact_dir: Path) -> list[str]:
    """Proton's command-line flags for these options (``-b`` omitted on auto)."""
    flags = ["-n", str(artifact_dir / PROFILE_STEM)]
    if options.backend != "auto":
        flags += ["-b", options.backend]
    flags += ["-c", options.context, "-d", options.data]
    mode = render_mode(options)
    if mode is not None:
        flags += ["-m", mode]
    if options.hook is not None:
        flags += ["-k", options.hook]
    return flags


def proton_env(options: ProtonOptions, artifact_dir: Path) -> dict[str, str]:
    """The ``AORTA_PROTON_*`` variables that :mod:`aorta_proton.payload` reads."""
    env = {
        "AORTA_PROTON_DIR": str(artifact_dir),
        "AORTA_PROTON_NAME": str(artifact_dir / PROFILE_STEM),
        "AORTA_PROTON_CONTEXT": options.context,
        "AORTA_PROTON_DATA": options.data,
    }
    optional = {
        "AORTA_PROTON_BACKEND": None if options.backend == "auto" else options.backend,
        "AORTA_PROTON_MODE": render_mode(options),
        "AORTA_PROTON_HOOK": options.hook,
    }
    env.update({k: v for k, v in optional.items() if v is not None})
    return env


def wrap(launch_: Launch, options: ProtonOptions, artifact_dir: Path) -> Launch:
    """The launch to run for this trial, or :class:`SetupError` when Proton cannot measure it."""
    auto = options.mode == "auto"
    options = dataclasses.replace(options, mode=launch.attach_mode(options.mode, launch_.argv))
    env = _environment(launch_, options)
    if options.mode == "env":
        _checked_python(launch_, env, options)
        wrapped = dataclasses.replace(launch_, env={**env, **proton_env(options, artifact_dir)})
    else:
        if auto and (problem := pinned_tracer_problem(options)):
            raise SetupError(problem)
        target = launch.cli_target(launch_.argv, said=launch.AUTO_CLI if auto else launch.CLI)
        python = _checked_python(launch_, env, options)
        runner = ("-m", RUNNER, *proton_flags(options, artifact_dir))
        argv = dataclasses.replace(target, program=python).rebuild(*runner)
        wrapped = dataclasses.replace(launch_, argv=argv, env=env)
    if auto:
        (Path(artifact_dir) / MODE_FILE).write_text(options.mode + "\n")
    return wrapped
