"""The workload argv after ``--``: split from Hydra's arguments and carried through the config
byte-for-byte (OmegaConf would otherwise read ``${...}`` inside an argument as interpolation, and
an argument that is not valid UTF-8 could not be written into Hydra's saved config).
"""

from __future__ import annotations

import base64
import os
import re

_INTERPOLATION = re.compile(r"(\\*)\$\{")
#: Marks an argument carried as base64 of its bytes (it holds bytes UTF-8 cannot decode).
_BYTES = "aorta-argv-bytes:"


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


def to_config(arg: str) -> str:
    """``arg`` as a config value that OmegaConf and YAML give back unchanged (:func:`from_config`).

    An argument with undecodable bytes (surrogate-escaped by Python) travels as base64.
    """
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return _BYTES + base64.b64encode(os.fsencode(arg)).decode("ascii")
    return escape_for_omegaconf(arg)


def from_config(value: str) -> str:
    """The argument :func:`to_config` carried, as Python gives argv (surrogate-escaped)."""
    if value.startswith(_BYTES):
        return os.fsdecode(base64.b64decode(value[len(_BYTES):]))
    return value
