"""Values aorta writes into Hydra's override grammar, and the sweep axes it reads back out of it.

Hydra parses every ``key=value`` it is given: a path such as ``/home/josé/a,b`` would be read
as a sweep of two values, ``(`` or ``'`` as a grammar error, ``${HOME}`` as an interpolation.
:func:`quote` makes any string reach the config unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hydra.core.override_parser.types import Override

from aorta_core.argv import escape_for_omegaconf

_QUOTE = re.compile(r"(\\*)'")
_TRAILING_BACKSLASHES = re.compile(r"(\\+)$")


def quote(value: str, *, resolved: bool = True) -> str:
    """``value`` as a single-quoted Hydra value that is read back as ``value``.

    Inside quotes Hydra reads ``\\'`` as a quote and a run of backslashes before a quote (or at
    the end) as escaped pairs; a config value (``resolved``) is then read through OmegaConf,
    which takes ``\\${`` as a literal ``${``. Hydra reads some of its own settings raw
    (``hydra.searchpath``): those pass ``resolved=False``.
    """
    text = escape_for_omegaconf(value) if resolved else value
    text = _QUOTE.sub(lambda m: m.group(1) * 2 + "\\'", text)
    text = _TRAILING_BACKSLASHES.sub(lambda m: m.group(1) * 2, text)
    return f"'{text}'"


@dataclass(frozen=True)
class Axis:
    """One key of the sweep and the overrides that give each of its values (Hydra's spelling)."""

    #: The key as the config names it (``cell`` for ``+cell=1,2``).
    key: str
    values: tuple[str, ...]
    #: Given as a sweep (``a=1,2``), not one value.
    swept: bool
    #: A key no config has (``+cell=1,2``): it only labels replicate cells.
    added: bool


def sweep_axes(overrides: Iterable[Override]) -> list[Axis]:
    """What Hydra's basic sweeper makes of ``overrides``, one entry per key (a later one replaces
    an earlier one: the command line replaces a recipe's ``hydra.sweeper.params``); each job
    takes one value of every entry."""
    axes: dict[str, Axis] = {}
    for override in overrides:
        key = override.get_key_element()  # with its + prefix, as the sweeper keys them
        axes.pop(key, None)
        swept = override.is_sweep_override()
        values = (override.sweep_string_iterator() if swept
                  else [override.get_value_element_as_str()])
        axes[key] = Axis(override.key_or_group, tuple(f"{key}={v}" for v in values), swept,
                         override.is_add() or override.is_force_add())
    return list(axes.values())
