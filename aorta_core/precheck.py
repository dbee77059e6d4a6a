"""Compose the config once before Hydra runs, so that a bad recipe, collector or option is one
line naming the problem and the fix instead of Hydra's multi-line report.

Sweep values (``a=1,2``, ``glob(*)``) and Hydra's own settings are left to Hydra: they are
checked when each job is composed.
"""

from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

#: Flags that change where configs come from; with them the pre-check cannot see the same
#: search path as Hydra, so Hydra reports errors itself.
_SEARCH_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")


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
    return text + " (python -m aorta_core --help lists recipes, workloads and collectors)"


def problem(args: list[str]) -> str | None:
    """The one-line reason the config cannot be composed from ``args``, or ``None``."""
    if any(a in _SEARCH_FLAGS or a.startswith(_SEARCH_FLAGS) for a in args):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    candidates = [a for a in args if "=" in a and not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(candidates)
    except HydraException as exc:
        return _one_line(exc)
    plain = [o.input_line for o in parsed
             if not o.is_sweep_override() and not o.is_hydra_override()]
    try:
        with initialize_config_module("aorta_core.conf", version_base="1.3"):
            compose("config", overrides=plain)
    except (HydraException, OmegaConfBaseException) as exc:
        return _one_line(exc)
    return None
