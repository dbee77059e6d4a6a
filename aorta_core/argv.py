"""The workload argv after ``--``: split from Hydra's arguments and carried through the config
byte-for-byte (OmegaConf would otherwise read ``${...}`` inside an argument as interpolation).
"""

from __future__ import annotations

import re

_INTERPOLATION = re.compile(r"(\\*)\$\{")


def split_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """``[hydra args...] -- [command...]`` -> (hydra args, command or None when no ``--``)."""
    if "--" not in args:
        return args, None
    cut = args.index("--")
    return args[:cut], args[cut + 1 :]


def escape_for_omegaconf(arg: str) -> str:
    """Escape ``${`` so that OmegaConf returns ``arg`` unchanged when the value is read.

    OmegaConf treats a backslash run directly before ``${`` specially: ``\\${`` is a literal
    ``${`` and each ``\\\\`` before it is one literal backslash.
    """
    return _INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", arg)
