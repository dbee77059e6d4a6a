"""The noise floor of ``aorta compare --noise-floor AA``: per cell and metric, the smallest
relative effect an A/A comparison says the test can tell from noise.

AA is one run, whose passing trials are split by index into two interleaved halves (trials
0, 2, 4, … against 1, 3, 5, …: drift over the run falls on both halves alike), or two runs
``RUN1,RUN2`` of the same command. Each (cell, metric) of the A/A gets the far end of the
bootstrap interval of its difference of medians (:mod:`.significance`), relative to its median:
the difference the noise alone reaches within 95 % of the time. That is two parts: the A/A's
own difference — between two runs, the shift of the whole machine from one run to the next,
which no number of trials averages away (measured on the shared 2-core VM: 5 of 20 A/A pairs of
torchprof runs had every op 2-10 % slower or faster) — and the interval's half-width, the
trial-to-trial noise, which a compared row of ``n_b`` and ``n_c`` trials scales by
``sqrt((1/n_b + 1/n_c) / (1/m_1 + 1/m_2))`` (the A/A had ``m_1`` and ``m_2``), as an
interval's width scales with the standard error.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from aorta_core.reports import cell_pairs
from aorta_core.reports.matrix_files import BadMatrix, load_matrix, passing_values
from aorta_core.reports.significance import compare_rows, min_trials


class NoiseFloorError(ValueError):
    """An A/A run that gives no floor; the message names the fix."""


@dataclass(frozen=True)
class Floor:
    #: The A/A's difference of medians and its interval's half-width, over the A/A's median.
    shift: float
    relative: float
    n_1: int
    n_2: int

    def at(self, n_baseline: int, n_candidate: int) -> float:
        """The floor at the compared row's trial counts."""
        return self.shift + self.relative * math.sqrt((1 / n_baseline + 1 / n_candidate)
                                                      / (1 / self.n_1 + 1 / self.n_2))


@dataclass(frozen=True)
class NoiseFloor:
    #: Which runs gave the floor, one phrase (the compare result carries it).
    source: str
    floors: dict[tuple[str, Hashable], Floor]

    def get(self, cells: tuple[str | None, ...], metric: Hashable) -> Floor | None:
        """The floor of the first of ``cells`` that the A/A measured ``metric`` in."""
        return next((f for c in cells if c and (f := self.floors.get((c, metric)))), None)


def _cells(path: Path) -> list[dict]:
    return load_matrix(path)["cells"]


def _renamed(values: dict[tuple[str, str], list], names: dict[str, str]) -> dict:
    """``values`` with their cells named as ``names`` pairs them (unpaired cells left out)."""
    return {(names[c], m): v for (c, m), v in values.items() if c in names}


def _pairs(a_cells: list[dict], b_cells: list[dict]) -> dict[str, str]:
    """B's cell names -> A's, paired as ``aorta compare`` pairs cells (:mod:`.cell_pairs`)."""
    return {b: a for a, b in cell_pairs.pair(a_cells, b_cells).pairs}


def metric_values(path: Path) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(cell, metric) -> [(trial, value)] of run ``path``'s passing trials."""
    load_matrix(path)
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for (cell, metric), part in passing_values(path).sort("trial").group_by(
            "cell", "metric", maintain_order=True):
        out[(cell, metric)] = list(zip(part["trial"], part["value"], strict=True))
    return out


#: What a floor is measured of: run folder -> (cell, row) -> [(trial, value)].
Reader = Callable[[Path], dict[tuple[str, Hashable], list[tuple[int, float]]]]


def _values(path: Path, option: str, read: Reader) -> dict:
    if not path.is_dir():
        raise NoiseFloorError(f"{option}: {path} is not a folder; pass the output folder of an "
                              "A/A run (the same command as the compared runs), or two: "
                              "RUN1,RUN2")
    try:
        return read(path)
    except BadMatrix as exc:
        raise NoiseFloorError(f"{option}: {exc}") from None


def _samples(parts: list[str], option: str, baseline: list[dict], read: Reader
              ) -> tuple[str, dict[tuple[str, str], tuple[list, list]]]:
    """(source phrase, (baseline's cell, metric) -> the two A/A samples); the A/A's cells
    are paired with the baseline's (and the second A/A run's with the first's) as ``aorta
    compare`` pairs cells."""
    if len(parts) == 1:
        runs = _values(Path(parts[0]), option, read)
        runs = _renamed(runs, _pairs(baseline, _cells(Path(parts[0]))))
        return (f"{parts[0]}, its trials split into halves (0, 2, 4, … vs 1, 3, 5, …)",
                {k: ([v for t, v in tv if t % 2 == 0], [v for t, v in tv if t % 2 == 1])
                 for k, tv in runs.items()})
    if len(parts) == 2:
        one, two = (_values(Path(p), option, read) for p in parts)
        first, second = (_cells(Path(p)) for p in parts)
        two = _renamed(_renamed(two, _pairs(first, second)), _pairs(baseline, first))
        one = _renamed(one, _pairs(baseline, first))
        return (f"{parts[0]} vs {parts[1]}",  # a row only one run has: one sample is empty
                {k: ([v for _, v in one.get(k, ())], [v for _, v in two.get(k, ())])
                 for k in one.keys() | two.keys()})
    raise NoiseFloorError(f"{option}: expected one run folder or two as RUN1,RUN2, got "
                          f"{','.join(parts)!r}")


def _runs(spec: str, option: str) -> list[str]:
    """The A/A run folders ``spec`` names: one folder (its name may hold commas), else two
    separated by a comma; an empty name (``$AA`` unset in CI) is refused, never read as "no
    floor"."""
    if spec and Path(spec).is_dir():
        return [spec]
    parts = spec.split(",")
    if "" in parts:
        raise NoiseFloorError(f"{option} {spec!r}: a run folder is empty; pass the output folder "
                              "of an A/A run (the same command as the compared runs), or two: "
                              "RUN1,RUN2")
    return parts


def _too_few(samples: dict[Hashable, tuple[list, list]], need: int, runs: list[str]) -> str:
    """What the A/A lacks for a floor: trials of one run split into halves, or of a run."""
    if len(runs) == 1:
        most = max((len(a) + len(b) for a, b in samples.values()), default=0)
        return (f"each A/A side needs ≥ {need} passing trials of a metric, the A/A has at most "
                f"{most} in all; rerun it with trials={2 * need} or more, or pass two runs of "
                f"the same command as RUN1,RUN2 ({need} trials each or more)")
    counts = [max((len(side[i]) for side in samples.values()), default=0) for i in (0, 1)]
    short = [f"{run} has at most {n}" for run, n in zip(runs, counts, strict=True) if n < need]
    return (f"each A/A run needs ≥ {need} passing trials of a metric the compared runs share; "
            f"{' and '.join(short) or 'no metric has them in both'}: rerun "
            f"{'it' if len(short) == 1 else 'them'} with trials={need} or more")


def measure(spec: str, alpha: float, baseline: list[dict], option: str = "--noise-floor",
            read: Reader = metric_values) -> NoiseFloor:
    """The floors of A/A ``spec`` (``RUN`` or ``RUN1,RUN2``), keyed by the cells of the
    baseline (its matrix.json's ``cells``); ``read``: which rows (the metrics, or the kernel
    rows of :func:`.kernel_changes.values_of`)."""
    runs = _runs(spec, option)
    try:
        source, samples = _samples(runs, option, baseline, read)
    except cell_pairs.PairingError as exc:
        raise NoiseFloorError(f"{option} {spec}: {exc}") from None
    need = min_trials(alpha)
    keys = [k for k, (a, b) in samples.items() if min(len(a), len(b)) >= need]
    if not keys:
        raise NoiseFloorError(f"{option} {spec}: {_too_few(samples, need, runs)}")
    stats = compare_rows([samples[k][0] for k in keys], [samples[k][1] for k in keys], alpha)
    floors = {}
    for k, s in zip(keys, stats, strict=True):
        a, b = samples[k]
        center = abs(statistics.median(a + b))
        if s.ci_low is None or s.ci_high is None:
            continue
        half, shift = (s.ci_high - s.ci_low) / 2, abs((s.ci_high + s.ci_low) / 2)
        if center > 0 or half == shift == 0:
            floors[k] = Floor(shift / center if center > 0 else 0.0,
                              half / center if center > 0 else 0.0, len(a), len(b))
    return NoiseFloor(source, floors)
