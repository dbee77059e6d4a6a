"""Which Triton the workload's interpreter has, and whether it supports the chosen options.

The check runs in the workload's interpreter (not aorta's), once per interpreter, because that
is the Triton that will run Proton; a feature it lacks would otherwise be dropped silently.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from aorta_core.api import SetupError
from aorta_proton.options import ProtonOptions
from aorta_proton.session import split_mode

#: Prints the version of the distribution that provides ``triton`` ("" when none) and whether
#: ``aorta_proton`` (the runner of ``mode: cli``) is importable.
PROBE = """\
import importlib.metadata as m, importlib.util as u, json
dists = m.packages_distributions().get("triton") or []
print(json.dumps({"triton": m.version(dists[0]) if dists else "",
                  "aorta_proton": u.find_spec("aorta_proton") is not None}))
"""

#: Oldest Triton aorta drives: ``start(mode=...)``, ``data: trace`` and instrumentation are 3.5.
MINIMUM = (3, 5)
BACKEND_SINCE = {"rocprofiler": (3, 8)}
BACKEND_MODE_SINCE = {
    ("cupti", "periodic_flushing"): (3, 7),
    ("roctracer", "periodic_flushing"): (3, 7),
    ("rocprofiler", "pcsampling"): (3, 9),
}


@dataclass(frozen=True)
class Interpreter:
    """What the probe found in one interpreter."""

    path: str
    triton: str  # "" when Triton is not installed
    has_runner: bool


_SEEN: dict[tuple[str, str | None], Interpreter] = {}


def probe(python: str, env: Mapping[str, str]) -> Interpreter:
    """Run :data:`PROBE` in ``python`` with the launch's environment, once per interpreter.

    The answer is cached per (interpreter, PYTHONPATH) for the life of this process.
    """
    key = (python, env.get("PYTHONPATH"))
    if key not in _SEEN:
        _SEEN[key] = _run_probe(python, env)
    return _SEEN[key]


def _run_probe(python: str, env: Mapping[str, str]) -> Interpreter:
    try:
        out = subprocess.run(
            [python, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(env),
            check=True,
        ).stdout
        found = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SetupError(
            f"cannot run the workload interpreter {python} to read its Triton version ({reason}); "
            "set AORTA_PROTON_PYTHON to a working Python"
        ) from exc
    return Interpreter(python, str(found["triton"]), bool(found["aorta_proton"]))


def parse_version(text: str) -> tuple[int, int] | None:
    """``"3.6.0+git1a2b"`` -> ``(3, 6)``; ``None`` when no ``major.minor`` can be read."""
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def _needs(options: ProtonOptions) -> list[tuple[str, tuple[int, int]]]:
    """Every feature these options use that appeared after :data:`MINIMUM`."""
    needs = [("Proton under aorta", MINIMUM)]
    if options.backend in BACKEND_SINCE:
        needs.append((f"backend: {options.backend}", BACKEND_SINCE[options.backend]))
    if options.backend_mode is not None:
        name = split_mode(options.backend_mode)[0]
        since = BACKEND_MODE_SINCE.get((options.backend, name))
        if since:
            needs.append((f"backend_mode: {name} with backend: {options.backend}", since))
    return needs


def require(found: Interpreter, options: ProtonOptions) -> tuple[int, int]:
    """Raise :class:`SetupError` unless ``found`` has a Triton that supports ``options``."""
    if not found.triton:
        raise SetupError(
            f"Triton is not installed in the workload interpreter {found.path}: "
            f"run `{found.path} -m pip install triton` (or set AORTA_PROTON_PYTHON)"
        )
    version = parse_version(found.triton)
    if version is None:
        raise SetupError(
            f"cannot read the Triton version {found.triton!r} of {found.path}: "
            "install a released triton (pip install triton)"
        )
    for feature, since in _needs(options):
        if version < since:
            want = ".".join(map(str, since))
            raise SetupError(
                f"{feature} needs Triton >= {want}, but {found.path} has triton {found.triton}: "
                f"run `{found.path} -m pip install 'triton>={want}'`"
            )
    return version
