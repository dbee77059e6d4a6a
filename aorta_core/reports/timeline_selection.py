"""What ``aorta timeline`` keeps of a trial: ranks, steps (``ProfilerStep#N``, benchmark steps)
and a window in ms after the timeline's origin, as ``--ranks``, ``--steps`` and ``--window``
give them."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aorta_core.api.intervals import merged


class Ints:
    """A set of ints as sorted disjoint runs ``(first, last)``: ``--steps 5-99999999999`` is one
    run, never a set of 1e11 ints."""

    def __init__(self, runs: Iterable[tuple[int, int]]) -> None:
        joined = merged((first, last + 1) for first, last in runs)  # [2, 3] and [4, 5] join
        self.firsts = [first for first, _ in joined]
        self.lasts = [end - 1 for _, end in joined]

    def __contains__(self, value: object) -> bool:
        i = bisect.bisect_right(self.firsts, value) - 1
        return i >= 0 and value <= self.lasts[i]

    def text(self) -> str:
        """As ``--ranks``/``--steps`` take them: ``0,2-5``."""
        return ",".join(str(first) if first == last else f"{first}-{last}"
                        for first, last in zip(self.firsts, self.lasts, strict=True))

    def to_json(self) -> list[int | list[int]]:
        """The ints, a run of three or more as ``[first, last]``."""
        out: list[int | list[int]] = []
        for first, last in zip(self.firsts, self.lasts, strict=True):
            out += [[first, last]] if last - first > 1 else list(range(first, last + 1))
        return out


@dataclass(frozen=True)
class Selection:
    """What to keep: ranks, ``ProfilerStep#N``/benchmark steps, a window in ms after the origin.
    Ranks and steps may be given as any collection of ints."""

    ranks: Ints | None = None
    steps: Ints | None = None
    window_ms: tuple[float | None, float | None] | None = None

    def __post_init__(self) -> None:
        for name in ("ranks", "steps"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Ints):
                object.__setattr__(self, name, Ints((v, v) for v in value))

    def text(self) -> str:
        """The options that made it: ``--steps 9 --window 0:50``."""
        low, high = self.window_ms or (None, None)
        window = f"{'' if low is None else f'{low:g}'}:{'' if high is None else f'{high:g}'}"
        return " ".join(f"--{name} {value}" for name, value in (
            ("ranks", self.ranks.text() if self.ranks is not None else None),
            ("steps", self.steps.text() if self.steps is not None else None),
            ("window", window if self.window_ms is not None else None)) if value is not None)

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks.to_json() if self.ranks is not None else None,
                "steps": self.steps.to_json() if self.steps is not None else None,
                "window_ms": list(self.window_ms) if self.window_ms is not None else None}


def parse_ints(text: str) -> Ints:
    """``"0,2-3"`` -> 0, 2 and 3; ``ValueError`` on anything else."""
    runs = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:  # not a number, or one of more than 4300 digits
            first = last = -1
        if first < 0 or last < first:
            raise ValueError(f"{part.strip()!r} is not N or A-B (0 <= A <= B)")
        runs.append((first, last))
    return Ints(runs)


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``"START:END"`` in ms (either side may be empty); ``ValueError`` on anything else, ``nan``
    and ``inf`` too."""
    start, colon, end = text.partition(":")
    try:
        low = float(start) if start.strip() else None
        high = float(end) if end.strip() else None
    except ValueError:
        colon = ""
    given = [v for v in (low, high) if v is not None] if colon else []
    if not colon or not all(map(math.isfinite, given)) or given != sorted(given):
        raise ValueError(f"{text!r} is not START:END in ms with START <= END (numbers; leave "
                         "a side out for no limit)")
    return low, high


#: Every rank, step and time.
EVERYTHING = Selection()
