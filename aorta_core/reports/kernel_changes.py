"""Which kernels (or CPU ops) got slower or faster between paired cells, by how many ms, and
whether that is more than noise: the kernel rows of ``aorta compare`` and of report.html's
headline.

Each passing trial's ``kernels.parquet`` (:mod:`aorta_core.engine.kernel_tables`) gives one
value per collector and kernel: its time per profiled step, that is the trial's total for the
kernel's key over the number of profiled steps in that collector's table (time between steps
counts towards the average, so a trial's rows add up to its capture's time per step), or its
total per capture where the collector saw no steps. A table that sums ranks is divided by the
trial's ``<collector>_rank_count`` metric, where the collector reports one: per-rank ms. A
kernel absent from a trial that has its collector's table ran 0 ms there; a trial without the
table (its parse failed) is left out of that collector's rows.

A row is one (cell pair, collector, kind, key), its trials' values tested by
:mod:`.significance` with q over the cell pair's rows (all its collectors' kernels: the family
one question asks about). It is ``significant`` when q ≤ alpha and its relative difference is
beyond the noise floor an A/A run measured for it (:mod:`.noise_floor`), where one was given.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_core.api.files import read_limited
from aorta_core.api.kernel_names import kernel_key
from aorta_core.engine.failed_cells import cell_folder
from aorta_core.engine.kernel_tables import KERNELS_NAME, rebuild_command
from aorta_core.engine.matrix import WALL
from aorta_core.reports import cell_pairs, significance
from aorta_core.reports.matrix_files import BadMatrix, load_matrix, passing_values

#: A kernel row's identity within a cell: (collector, kind, key).
Ident = tuple[str, str, str]
#: Step metrics a per-step comparison is explained against, tried in order (``{c}``: the
#: collector's name); the first both cells measured is used, else the wall time. The
#: collector's own first: it times the profiled steps its rows come from (on an H100 the
#: workload's own timing of 40 later steps moved ±3 % across trials where the rows' GEMM
#: moved ±0.1 %: the GPU's clocks are not those of the profiled window).
STEP_METRICS = ("{c}_step_time_ms", "workload_step_time_ms")
_TYPES = {"collector": "String", "name": "String", "key": "String", "kind": "String",
          "step": "Int64", "total_ms": "Float64"}


@dataclass
class KernelValues:
    """One run's kernel tables, reduced to one value per trial and row."""

    #: (cell, ident) -> [(trial, ms)], over the passing trials that hold the collector's table.
    values: dict[tuple[str, Ident], list[tuple[int, float]]] = field(default_factory=dict)
    #: A readable name per ident (the demangled name of its first row).
    names: dict[Ident, str] = field(default_factory=dict)
    #: (cell, collector) -> whether its tables had profiled steps.
    stepped: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: Tables that could not be used, one line each.
    problems: list[str] = field(default_factory=list)


def _passing_trials(long) -> dict[str, list[int]]:
    """cell -> the indices of its passing trials (``long``: :func:`.passing_values`)."""
    out: dict[str, list[int]] = {}
    for cell, trial in long.select("cell", "trial").unique().sort("cell", "trial").iter_rows():
        out.setdefault(cell, []).append(trial)
    return out


def _table(path: Path, root: Path):
    """One trial's kernels.parquet, checked; ``None`` when there is none; ValueError naming
    what is wrong with one that cannot be used."""
    import polars as pl

    try:
        data = read_limited(path, root)
    except FileNotFoundError:
        return None
    try:
        frame = pl.read_parquet(io.BytesIO(data), columns=list(_TYPES))
    except (Exception, pl.exceptions.PanicException) as exc:  # damaged bytes, columns missing
        raise ValueError(type(exc).__name__) from None
    wrong = {c: str(t) for c, t in frame.schema.items()
             if t != getattr(pl, _TYPES[c]) and t != pl.Null}
    if wrong:
        raise ValueError(f"columns of the wrong type: {wrong}")
    return frame


def _frames(output: Path, cells: Sequence[dict[str, Any]], trials: dict[str, list[int]],
            problems: list[str]):
    """Every passing trial's table as one frame with its cell and trial, ``None`` when none."""
    import numpy as np
    import polars as pl

    frames, owners = [], []
    for cell in cells:
        folder = cell_folder(output, cell)
        if folder is None:
            continue
        for trial in trials.get(cell["cell"], []):
            path = folder / f"trial_{trial:03d}" / KERNELS_NAME
            try:
                frame = _table(path, output)
            except (OSError, ValueError) as exc:
                why = str(exc).removeprefix(f"{path} ")  # an OSError names the path too
                problems.append(f"{path}: not a kernel table aorta can read ({why}); rebuild it "
                                f"with {rebuild_command(output)}")
                continue
            if frame is not None and len(frame):
                frames.append(frame)
                owners.append((cell["cell"], trial, len(frame)))
    if not frames:
        return None
    heights = [n for _, _, n in owners]
    rows = pl.concat(frames, how="vertical_relaxed")
    names = rows["name"].unique()
    return rows.with_columns(
        # as this aorta keys names, whichever version wrote the table: old and new tables pair
        key=pl.col("name").replace_strict(names, [kernel_key(n) for n in names]),
        cell=pl.Series(np.repeat([c for c, _, _ in owners], heights), dtype=pl.String),
        trial=pl.Series(np.repeat([t for _, t, _ in owners], heights), dtype=pl.Int64))


def _rank_counts(long) -> dict[tuple[str, int, str], float]:
    """(cell, trial, collector) -> the trial's ``<collector>_rank_count``."""
    import polars as pl

    long = long.filter(pl.col("metric").str.ends_with("_rank_count"))
    return {(c, t, m.removesuffix("_rank_count")): v
            for c, t, m, v in long.select("cell", "trial", "metric", "value").iter_rows()
            if v >= 1}


def load(output: Path, cells: Sequence[dict[str, Any]] | None = None) -> KernelValues:
    """The kernel values of run folder ``output`` (``cells``: its matrix.json's, read when not
    given); :class:`BadMatrix` when its matrix files cannot be read."""
    import polars as pl

    cells = load_matrix(output)["cells"] if cells is None else cells
    out = KernelValues()
    long = passing_values(output)
    rows = _frames(output, cells, _passing_trials(long), out.problems)
    if rows is None:
        return out
    steps = rows.group_by("cell", "trial", "collector").agg(
        steps=pl.col("step").drop_nulls().n_unique())
    per_key = rows.group_by("cell", "trial", "collector", "kind", "key").agg(
        pl.col("total_ms").sum(), pl.col("name").first())
    per_key = per_key.join(steps, on=["cell", "trial", "collector"])
    ranks = _rank_counts(long)
    for cell, trial, collector, kind, key, total, name, n_steps in per_key.sort(
            "cell", "collector", "kind", "key", "trial").iter_rows():
        ident = (collector, kind, key)
        out.names.setdefault(ident, name)
        value = total / max(n_steps, 1) / ranks.get((cell, trial, collector), 1.0)
        out.values.setdefault((cell, ident), []).append((trial, value))
        out.stepped[(cell, collector)] = out.stepped.get((cell, collector), False) or n_steps > 0
    _fill_zeros(out, steps)
    return out


def _fill_zeros(out: KernelValues, steps) -> None:
    """A kernel absent from a trial that holds its collector's table: 0 ms in that trial."""
    tabled: dict[tuple[str, str], list[int]] = {}
    for cell, trial, collector, _ in steps.sort("trial").iter_rows():
        tabled.setdefault((cell, collector), []).append(trial)
    for (cell, ident), seen in out.values.items():
        have = dict(seen)
        seen[:] = [(t, have.get(t, 0.0)) for t in tabled[(cell, ident[0])]]


def values_of(output: Path) -> dict[tuple[str, Ident], list[tuple[int, float]]]:
    """:func:`load`'s values, the shape :mod:`.noise_floor` measures floors of."""
    return load(output).values


@dataclass
class KernelChange:
    """One kernel of one cell pair and collector, baseline against candidate."""

    cell: str
    baseline_cell: str
    candidate_cell: str
    collector: str
    kind: str
    name: str
    key: str
    #: "ms/step" or "ms/capture" (:mod:`module docs <.kernel_changes>`).
    unit: str
    n_baseline: int
    n_candidate: int
    #: Medians of the trials' values.
    baseline_ms: float | None
    candidate_ms: float | None
    delta_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    p: float | None
    q: float | None
    significant: bool
    noise_floor: float | None = None
    untested: str = ""


@dataclass
class KernelSummary:
    """What one cell pair's kernels of one collector explain of the measured difference."""

    cell: str
    collector: str
    unit: str
    rows: int
    tested: int
    slower: int
    faster: int
    #: Sum of the significant rows' differences, and of every row's.
    significant_delta_ms: float
    all_delta_ms: float
    #: The measured difference it is set against: the metric and its difference of medians
    #: (ms) with its 95 % bootstrap interval; ``None`` where a cell did not measure it (the
    #: interval also where a side had too few trials to test it).
    reference: str
    reference_delta_ms: float | None
    #: ``significant_delta_ms / reference_delta_ms``: a share the reference pins down only
    #: where its interval excludes 0 (a step time noisier than the change leaves it open).
    explained: float | None
    #: The fewest trials a side at which one change alone among ``tested`` rows can reach
    #: q ≤ alpha (BH's q of a lone change is its p times the rows tested), and the fewest
    #: this pair had.
    trials_needed: int
    trials: int
    reference_ci_low_ms: float | None = None
    reference_ci_high_ms: float | None = None


def _sample(run: KernelValues, cell: str, ident: Ident, trials: list[int]) -> list[float]:
    got = dict(run.values.get((cell, ident), ()))
    return [got.get(t, 0.0) for t in trials]


def _tabled_trials(run: KernelValues, cell: str) -> dict[str, list[int]]:
    """collector -> the trials of ``cell`` that hold its table."""
    out: dict[str, list[int]] = {}
    for (c, ident), seen in run.values.items():
        if c == cell and ident[0] not in out:
            out[ident[0]] = [t for t, _ in seen]
    return out


def changes(a: KernelValues, b: KernelValues, pairs: Sequence[tuple[str, str]],
            alpha: float, floor: Any = None) -> list[KernelChange]:
    """Every kernel row of every cell pair (A cell, B cell) whose collector both cells
    tabled, tested together (q within each pair); ``floor``: a :class:`.noise_floor.NoiseFloor`
    of kernel values, or ``None``."""
    out, samples = [], []
    for a_cell, b_cell in pairs:
        a_trials, b_trials = _tabled_trials(a, a_cell), _tabled_trials(b, b_cell)
        idents = sorted({i for c, i in (*a.values, *b.values)
                         if c in (a_cell, b_cell) and i[0] in a_trials and i[0] in b_trials})
        for ident in idents:
            xs = _sample(a, a_cell, ident, a_trials[ident[0]])
            ys = _sample(b, b_cell, ident, b_trials[ident[0]])
            stepped = a.stepped.get((a_cell, ident[0])) and b.stepped.get((b_cell, ident[0]))
            out.append(KernelChange(
                cell_pairs.label(a_cell, b_cell), a_cell, b_cell, ident[0], ident[1],
                a.names.get(ident) or b.names.get(ident) or ident[2], ident[2],
                "ms/step" if stepped else "ms/capture", len(xs), len(ys),
                statistics.median(xs), statistics.median(ys), None, None, None, None, None,
                False))
            samples.append((xs, ys))
    stats = significance.compare_rows([x for x, _ in samples], [y for _, y in samples], alpha,
                                      [r.cell for r in out])
    for row, s in zip(out, stats, strict=True):
        row.delta_ms, row.ci_low_ms, row.ci_high_ms = s.delta, s.ci_low, s.ci_high
        row.p, row.q, row.untested = s.p, s.q, s.untested
        found = floor.get((row.baseline_cell,), (row.collector, row.kind, row.key)) \
            if floor else None
        row.noise_floor = found.at(row.n_baseline, row.n_candidate) if found else None
        row.significant = s.significant and (row.noise_floor is None
                                             or _relative(row) > row.noise_floor)
    return out


def _relative(row: KernelChange) -> float:
    if row.baseline_ms:
        return abs(row.delta_ms or 0.0) / abs(row.baseline_ms)
    return float("inf") if row.delta_ms else 0.0


#: (cell, metric) -> the passing trials' values, of one run.
Metrics = dict[tuple[str, str], list[float]]


def _reference(a_metrics: Metrics, b_metrics: Metrics, a_cell: str, b_cell: str,
               collector: str, stepped: bool, alpha: float
               ) -> tuple[str, significance.RowStats | None]:
    """The measured difference the pair's kernels are set against: the first step metric both
    cells measured for rows per step (:data:`STEP_METRICS`), the wall time (in ms) for rows per
    capture; (metric, its statistics, ``None`` where the cells did not both measure it)."""
    def stats(name: str, scale: float = 1.0) -> significance.RowStats | None:
        a, b = a_metrics.get((a_cell, name)), b_metrics.get((b_cell, name))
        if not (a and b):
            return None
        return significance.compare_rows([[scale * v for v in a]], [[scale * v for v in b]],
                                         alpha)[0]

    if not stepped:
        return WALL, stats(WALL, 1000.0)
    names = [m.format(c=collector) for m in STEP_METRICS]
    return next(((n, s) for n in names if (s := stats(n)) is not None), (names[0], None))


def summaries(rows: Sequence[KernelChange], a_metrics: Metrics, b_metrics: Metrics,
              alpha: float) -> list[KernelSummary]:
    """Per cell pair and collector, how much of the measured step (or wall) difference its
    significant rows explain (``a_metrics``, ``b_metrics``: each run's metric values)."""
    groups: dict[tuple[str, str], list[KernelChange]] = {}
    for r in rows:
        groups.setdefault((r.cell, r.collector), []).append(r)
    out = []
    for (cell, collector), part in groups.items():
        first = part[0]
        stepped = all(r.unit == "ms/step" for r in part)
        metric, ref_stats = _reference(a_metrics, b_metrics, first.baseline_cell,
                                       first.candidate_cell, collector, stepped, alpha)
        ref = ref_stats.delta if ref_stats else None
        sig = sum(r.delta_ms for r in part if r.significant and r.delta_ms is not None)
        tested = sum(r.p is not None for r in part)
        # the rows BH weighs together; none tested (too few trials): all the cell's rows would be
        family = (sum(r.p is not None for r in rows if r.cell == cell)
                  or sum(r.cell == cell for r in rows))
        out.append(KernelSummary(
            cell, collector, first.unit, len(part), tested,
            sum(r.significant and (r.delta_ms or 0) > 0 for r in part),
            sum(r.significant and (r.delta_ms or 0) < 0 for r in part), sig,
            sum(r.delta_ms or 0.0 for r in part), metric, ref,
            sig / ref if ref else None, significance.min_trials(alpha / max(family, 1)),
            min(min(r.n_baseline, r.n_candidate) for r in part),
            ref_stats.ci_low if ref_stats else None, ref_stats.ci_high if ref_stats else None))
    return out


def load_pair(a_path: Path, b_path: Path, a_cells: list[dict], b_cells: list[dict]
              ) -> tuple[KernelValues, KernelValues]:
    """Both runs' kernel values (:func:`load`); a run whose matrix files cannot be read has
    none (the metric comparison has already said why)."""
    def one(path: Path, cells: list[dict]) -> KernelValues:
        try:
            return load(path, cells)
        except BadMatrix as exc:
            return KernelValues(problems=[str(exc)])
    a, b = one(a_path, a_cells), one(b_path, b_cells)
    for run, path, other in ((a, a_path, b), (b, b_path, a)):
        if other.values and not run.values and not run.problems:
            run.problems.append(f"{path}: no passing trial keeps a kernel table ({KERNELS_NAME}), "
                                f"so there are no kernel rows; write them with "
                                f"{rebuild_command(path)}")
    return a, b
