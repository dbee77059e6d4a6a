"""Values aorta writes into Hydra's override grammar, and the sweep axes it reads back out of it.

Hydra parses every ``key=value`` it is given: a path such as ``/home/josé/a,b`` would be read
as a sweep of two values, ``(`` or ``'`` as a grammar error, ``${HOME}`` as an interpolation.
:func:`quote` makes any string reach the config unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from hydra.core.override_parser.types import ChoiceSweep, Glob, Override, RangeSweep, Sweep

from aorta_core.engine.argv import escape_for_omegaconf

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


#: The most jobs one sweep may have: Hydra's basic sweeper lists every job before the first runs,
#: so ``range(0,1e12)`` would fill memory (and ``range(0,inf)`` never end) before anything ran.
MAX_JOBS = 100_000


class SweepError(ValueError):
    """A sweep Hydra's basic sweeper cannot enumerate; the message is one line with the fix."""


def _range_size(override: Override, sweep: RangeSweep) -> int:
    """How many values ``range()`` gives, counted as Hydra steps it (in ``Decimal`` when a bound
    is a float), without making them."""
    bounds = (sweep.start, sweep.stop, sweep.step)
    if not all(isinstance(b, int) or (isinstance(b, float) and math.isfinite(b)) for b in bounds) \
            or not sweep.step:
        raise SweepError(f"{override.input_line}: range(start, stop, step) needs finite bounds "
                         "and a step other than 0")
    start, stop, step = map(Decimal, bounds)
    if (stop - start) * step <= 0:
        return 0
    return math.ceil((stop - start) / step)


def _size(override: Override) -> int:
    """How many values the sweep ``override`` gives (a glob's are its group's options)."""
    value = override.value()
    if isinstance(value, RangeSweep):
        return _range_size(override, value)
    items = value.list if isinstance(value, ChoiceSweep) else None
    if items is not None and any(isinstance(i, Sweep | Glob) for i in items):
        raise SweepError(f"{override.input_line}: a sweep (range, interval, glob, choice) cannot "
                         "be one of a list's values; give the values as a,b,c or one range()")
    return len(items) if items is not None else len(list(override.sweep_string_iterator()))


def _checked_sizes(last: Iterable[Override]) -> None:
    """Refuse an axis with no value (``range(0)``, a glob matching nothing) and more jobs than
    :data:`MAX_JOBS`, before any value is made."""
    jobs = 1
    for override in last:
        if not override.is_sweep_override():
            continue
        size = _size(override)
        if size == 0:
            raise SweepError(f"{override.input_line} sweeps no value (an empty range or a glob "
                             "that matches nothing); give at least one")
        jobs *= size
        if jobs > MAX_JOBS:
            raise SweepError(f"the sweep has more than {MAX_JOBS} jobs ({override.input_line} "
                             "and the axes before it); sweep fewer values, or split it into "
                             "several sweeps")


def sweep_axes(overrides: Iterable[Override]) -> list[Axis]:
    """What Hydra's basic sweeper makes of ``overrides``, one entry per key (a later one replaces
    an earlier one: the command line replaces a recipe's ``hydra.sweeper.params``); each job
    takes one value of every entry. :class:`SweepError` when the sweeper could not list them."""
    last: dict[str, Override] = {}
    for override in overrides:
        key = override.get_key_element()  # with its + prefix, as the sweeper keys them
        last.pop(key, None)
        last[key] = override
    _checked_sizes(last.values())
    axes: dict[str, Axis] = {}
    for key, override in last.items():
        swept = override.is_sweep_override()
        values = (override.sweep_string_iterator() if swept
                  else [override.get_value_element_as_str()])
        axes[key] = Axis(override.key_or_group, tuple(f"{key}={v}" for v in values), swept,
                         override.is_add() or override.is_force_add())
    return list(axes.values())
