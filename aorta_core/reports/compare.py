"""``aorta compare <run A> <run B>``: per pair of cells (:mod:`.cell_pairs`) and metric,
baseline vs candidate, asv's marks.

Marks (as asv): ``+`` worse by more than the factor and significant (or untestable: too few
trials), ``-`` better likewise, ``~`` past the factor but not significant, ``!`` newly failing
(A measured it, B's cell has no passing trial), ``*`` fixed (the reverse), ``x`` not comparable
(different environment, or the metric/cell exists on one side only for another reason), blank:
within the factor.
Values are medians of the passing trials' per-trial values in ``matrix.parquet``. A baseline of
0 or below has no meaningful ratio: such a row is judged by the difference.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aorta_core.engine.matrix import WALL
from aorta_core.engine.perfmd import md_code, md_text
from aorta_core.reports import (
    cell_pairs,
    kernel_changes,
    kernel_section,
    noise_floor,
    significance,
)
from aorta_core.reports.matrix_files import BadMatrix, load_matrix, passing_values
from aorta_core.reports.run_differences import MAX_CELL_LINES, Difference, differences

#: A metric is "higher is better" when its name contains one of these; all others (times
#: ``_ms``/``_us``/``_s``, ``_bytes``, counts, loss) are "lower is better", as in asv.
HIGHER_IS_BETTER = ("_per_s", "tflops", "gflops", "overlap_ratio", "hidden_ratio", "throughput")
_ENV_PACKAGES = ("torch", "triton", "pytorch-triton-rocm")


class CompareError(Exception):
    """A run folder that cannot be compared; the message names the fix."""


def higher_is_better(metric: str) -> bool:
    if metric.endswith("_per_s"):
        return True
    return any(key in metric for key in HIGHER_IS_BETTER if key != "_per_s")


@dataclass
class Run:
    path: Path
    matrix: dict[str, Any]
    cells: dict[str, dict[str, Any]]
    #: (cell, metric) -> per-trial values of the passing trials.
    values: dict[tuple[str, str], list[float]]


@dataclass
class Row:
    #: The pair's name (:func:`.cell_pairs.label`); its cell in each run, ``None`` on a side
    #: that has none.
    cell: str
    baseline_cell: str | None
    candidate_cell: str | None
    metric: str
    mark: str
    baseline: float | None
    candidate: float | None
    #: candidate / baseline; ``None`` unless the baseline is above 0.
    ratio: float | None
    #: candidate - baseline, when both sides measured it.
    difference: float | None
    p_value: float | None
    n_baseline: int
    n_candidate: int
    better: str
    note: str = ""
    #: Why a row measured on both sides has no p-value (:func:`.significance.inconclusive`).
    untested: str = ""
    #: Benjamini–Hochberg q over the cell pair's rows, and the bootstrap interval of
    #: ``difference`` (:mod:`.significance`).
    q: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: The floor of ``--noise-floor`` (relative to the baseline), ``None`` where none was
    #: measured (:mod:`.noise_floor`).
    noise_floor: float | None = None
    #: q ≤ alpha and the relative difference beyond the noise floor (where one was measured).
    significant: bool = False


@dataclass
class Result:
    baseline: str
    candidate: str
    factor: float
    alpha: float
    test: str
    comparable: bool
    environment_differences: list[str]
    #: Command, collectors, options, environment variables and environment, before any metric.
    differences: list[Difference] = field(default_factory=list)
    #: How the cells were paired, one sentence.
    pairing: str = ""
    rows: list[Row] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: When no cell pairs: the problem and its fix, one line (exit status 2).
    nothing_compared: str = ""
    #: When cells are set against themselves (a run compared with itself): what that measures.
    self_compared: str = ""
    #: Which runs gave the noise floor (``--noise-floor``), ``""`` without one.
    noise_floor: str = ""
    #: Every kernel row of every cell pair (:mod:`.kernel_changes`), and per pair and
    #: collector what the significant ones explain of the measured difference.
    kernels: list[kernel_changes.KernelChange] = field(default_factory=list)
    kernel_summaries: list[kernel_changes.KernelSummary] = field(default_factory=list)
    #: Kernel tables that could not be used, or why the kernel rows have no noise floor.
    kernel_notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_run(path: Path) -> Run:
    """The matrix files of run folder ``path``, checked (:mod:`.matrix_files`)."""
    path = Path(path)
    if not path.is_dir():
        raise CompareError(f"{path} is not a folder; pass a sweep's output folder")
    try:
        matrix = load_matrix(path)
        long = passing_values(path)
    except BadMatrix as exc:
        raise CompareError(str(exc)) from None
    values: dict[tuple[str, str], list[float]] = {}
    for (cell, metric), part in long.group_by("cell", "metric", maintain_order=True):
        values[(cell, metric)] = part["value"].to_list()
    cells = {c["cell"]: c for c in matrix["cells"]}
    return Run(path, matrix, cells, values)


def _used_collectors(run: Run) -> set[str]:
    return {n for c in run.cells.values() for n in c.get("collectors") or []}


def _signature(run: Run, used: set[str]) -> dict[str, set[str]]:
    """What must match for two runs to be comparable, each as a set of values."""
    out: dict[str, set[str]] = {"GPU": set(), "driver": set(),
                                **{p: set() for p in _ENV_PACKAGES},
                                **{f"collector {n}": set() for n in sorted(used)}}
    for env in run.matrix.get("environments") or []:
        gpus = [g for g in env.get("gpus") or [] if isinstance(g, dict)]
        out["GPU"].add(", ".join(sorted(str(g.get("name")) for g in gpus)) or "none")
        out["driver"].add(", ".join(sorted({str(g.get("driver")) for g in gpus})) or "none")
        for p in _ENV_PACKAGES:
            out[p].add(str((env.get("packages") or {}).get(p)))
        for n in used:
            out[f"collector {n}"].add(str((env.get("collectors") or {}).get(n)))
    return out


def environment_differences(a: Run, b: Run) -> list[str]:
    """The differences that make the runs not comparable, ``key: A values vs B values``."""
    used = _used_collectors(a) | _used_collectors(b)
    sa, sb = _signature(a, used), _signature(b, used)
    diffs = []
    for key in dict.fromkeys([*sa, *sb]):
        va, vb = sa.get(key, {"None"}), sb.get(key, {"None"})
        if va != vb:
            diffs.append(f"{key}: {' | '.join(sorted(va))} vs {' | '.join(sorted(vb))}")
    return diffs


def run_differences(a: Run, b: Run, env_diffs: list[str], pairing: cell_pairs.Pairing
                    ) -> list[Difference]:
    """Everything that differs between the runs (:mod:`.run_differences`), cell against paired
    cell; those among ``env_diffs`` (:func:`environment_differences`) are marked as making them
    not comparable."""
    blocking = {d.split(": ", 1)[0] for d in env_diffs}
    return differences((a.path, a.matrix), (b.path, b.matrix),
                       _used_collectors(a) | _used_collectors(b), blocking, pairing)


def _failed(run: Run, cell: str) -> bool:
    c = run.cells.get(cell) or {}
    trials = c.get("trials") or {}
    return bool(c.get("error") or trials.get("fail") or trials.get("error"))


def _moved(base: float, cand: float, factor: float) -> int:
    """+1 when the candidate went up past the factor, -1 down past it, else 0. A positive
    baseline is judged by the ratio (as asv); one of 0 or below, whose ratio means nothing, by
    the difference against its magnitude (any change of a 0 is past every factor)."""
    if base > 0:
        ratio = cand / base
        return 1 if ratio > factor else -1 if ratio < 1 / factor else 0
    if base == 0:
        return (cand > 0) - (cand < 0)
    change = (cand - base) / -base
    return 1 if change > factor - 1 else -1 if change < 1 - factor else 0


def _mark(moved: int, higher: bool, tested: bool, significant: bool) -> str:
    """The mark of a row measured on both sides: ``moved`` (:func:`_moved`) gives the direction,
    ``significant`` whether it counts; an untested change is marked by the factor alone, as asv
    does, and its row says why it was not tested."""
    if not moved:
        return " "
    if tested and not significant:
        return "~"
    return "-" if (moved > 0) == higher else "+"


def _row(a: Run, b: Run, cells: tuple[str | None, str | None], metric: str,
         comparable: bool) -> Row | None:
    """The row of ``metric`` in a pair of cells, its statistics not yet set (:func:`_test`)."""
    a_cell, b_cell = cells
    va = a.values.get((a_cell, metric), []) if a_cell else []
    vb = b.values.get((b_cell, metric), []) if b_cell else []
    if not va and not vb:
        return None
    higher = higher_is_better(metric)
    base = statistics.median(va) if va else None
    cand = statistics.median(vb) if vb else None
    name = cell_pairs.label(a_cell, b_cell) if a_cell and b_cell else a_cell or b_cell
    row = Row(name, a_cell, b_cell, metric, " ", base, cand, None, None, None, len(va),
              len(vb), "higher" if higher else "lower")
    if a_cell is None or b_cell is None:
        row.mark, row.note = "x", f"cell only in {'candidate' if a_cell is None else 'baseline'}"
        return row
    if not comparable:
        row.mark, row.note = "x", "different environment"
    elif va and not vb:
        row.mark, row.note = ("!", "no passing trial") if _failed(b, b_cell) else (
            "x", "not measured")
    elif vb and not va:
        row.mark, row.note = ("*", "baseline had no passing trial") if _failed(a, a_cell) else (
            "x", "not measured in baseline")
    if va and vb:
        row.difference = cand - base
        row.ratio = cand / base if base > 0 else None
        if base <= 0:
            row.note = "; ".join(filter(None, (row.note, "baseline ≤ 0: compared by the "
                                                           "difference")))
    return row


def _relative(row: Row) -> float:
    """|difference| over the baseline's magnitude (infinite where a baseline of 0 moved)."""
    if row.baseline:
        return abs(row.difference) / abs(row.baseline)
    return math.inf if row.difference else 0.0


def _test(a: Run, b: Run, rows: list[Row], factor: float, alpha: float,
          floor: noise_floor.NoiseFloor | None) -> None:
    """Set every measured row's statistics, all rows at once (q within each cell pair), and
    its mark."""
    measured = [r for r in rows if r.difference is not None]
    stats = significance.compare_rows(
        [a.values[(r.baseline_cell, r.metric)] for r in measured],
        [b.values[(r.candidate_cell, r.metric)] for r in measured], alpha,
        [r.cell for r in measured])
    for r, s in zip(measured, stats, strict=True):
        r.p_value, r.q, r.ci_low, r.ci_high, r.untested = s.p, s.q, s.ci_low, s.ci_high, \
            s.untested
        found = floor.get((r.baseline_cell,), r.metric) if floor else None
        r.noise_floor = found.at(r.n_baseline, r.n_candidate) if found else None
        r.significant = s.significant and (r.noise_floor is None
                                           or _relative(r) > r.noise_floor)
        if r.mark == " ":
            r.mark = _mark(_moved(r.baseline, r.candidate, factor), r.better == "higher",
                           s.p is not None, r.significant)


#: A ``--fail-on`` rule on kernel rows: ``kernel:<glob of names or keys>:<percent>``.
KERNEL_RULE = "kernel:"


def worse_pct(row: Row) -> float | None:
    """How much worse the candidate is, in percent of the baseline's magnitude (negative:
    better); infinite when a baseline of 0 moved."""
    if row.difference is None or row.baseline is None:
        return None
    worse = -row.difference if row.better == "higher" else row.difference
    if row.baseline == 0:
        return math.copysign(math.inf, worse) if worse else 0.0
    return worse / abs(row.baseline) * 100.0


def _check_threshold(option: str, value: float, ok: bool, expected: str) -> None:
    if not (math.isfinite(value) and ok):
        raise CompareError(f"{option} {value:g}: expected {expected}")


def parse_fail_on(specs: list[str]) -> list[tuple[str, float]]:
    out = []
    for spec in specs:
        metric, _, pct = spec.rpartition(":")
        try:
            value = float(pct)
        except ValueError:
            value = math.nan
        if not metric or not (math.isfinite(value) and value >= 0) or metric == "kernel":
            raise CompareError(f"--fail-on {spec!r}: expected <metric>:<percent> or "
                               "kernel:<name>:<percent>, the percent a finite number >= 0, e.g. "
                               "workload_step_time_ms:5 or 'kernel:*gemm*:5' (the metric or name "
                               "may be a glob)")
        out.append((metric, value))
    return out


def _gate_line(r: Row, pct_worse: float, pct: float) -> str:
    if math.isinf(pct_worse):
        how = f"worse than a baseline of 0 ({r.baseline:g} → {r.candidate:g})"
    else:
        how = f"{pct_worse:.1f}% worse"
    tail = f", {r.untested}" if r.untested else ""
    return f"{r.cell} {r.metric}: {how} (limit {pct:g}%{tail})"


def _kernel_gate_line(k: kernel_changes.KernelChange, pct_worse: float, pct: float,
                      needed: int | None) -> str:
    how = (f"new in the candidate (0 → {k.candidate_ms:.4g} {k.unit})" if math.isinf(pct_worse)
           else f"{k.delta_ms:+.4g} {k.unit}, {pct_worse:.1f}% slower")
    tail = (f", {k.untested}" if k.untested else
            f", inconclusive: q reaches alpha among these rows only from {needed} trials a side"
            if needed else "")
    return f"{k.cell} {k.collector} kernel {k.name}: {how} (limit {pct:g}%{tail})"


def _check_kernel_rule(result: Result, pattern: str, pct: float) -> None:
    """``--fail-on 'kernel:<glob>:PCT'``: kernel rows (name or key matching) slower by more than
    PCT % of their baseline and significant, or untestable: too few trials for one row, or for
    any row of its pair to reach q ≤ alpha (``trials_needed``); those are gated on the
    percentage alone, as a gate never passes because it could not test."""
    glob = pattern.removeprefix(KERNEL_RULE)
    if not result.kernels:
        result.failures.append(f"{pattern}: no kernel rows to check (neither pair of cells kept "
                               "kernel tables: run a collector that sees kernels, e.g. "
                               "collector=torchprof, or rebuild them with aorta parse <run> "
                               "--kernels)")
        return
    rows = [k for k in result.kernels
            if fnmatch.fnmatchcase(k.name, glob) or fnmatch.fnmatchcase(k.key, glob)]
    if not rows:
        names = sorted({k.name for k in result.kernels})
        shown = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")
        raise CompareError(f"--fail-on {pattern}: no kernel row matches {glob!r} (kernels: "
                           f"{shown})")
    short = {(s.cell, s.collector): s.trials_needed for s in result.kernel_summaries
             if s.trials < s.trials_needed}
    for k in rows:
        if k.delta_ms is None or k.baseline_ms is None or k.delta_ms <= 0:
            continue
        pct_worse = k.delta_ms / k.baseline_ms * 100 if k.baseline_ms > 0 else math.inf
        needed = short.get((k.cell, k.collector))
        if pct_worse > pct and (k.significant or k.p is None or needed):
            result.failures.append(_kernel_gate_line(k, pct_worse, pct, needed))


def _check_fail_on(result: Result, rules: list[tuple[str, float]]) -> None:
    """Each rule's failures: rows past the percentage that are significant (beyond the noise
    floor, where one was measured). A row that could not be tested (too few trials) is gated on
    the percentage alone: a gate never passes because a row was untestable. A rule
    ``kernel:<glob>`` gates the kernel rows instead (:func:`_check_kernel_rule`)."""
    for pattern, pct in rules:
        kernel = pattern.startswith(KERNEL_RULE)
        rows = [r for r in result.rows if not kernel and fnmatch.fnmatchcase(r.metric, pattern)]
        if not rows and not kernel:
            metrics = sorted({r.metric for r in result.rows})
            raise CompareError(f"--fail-on {pattern}: no such metric in either run (metrics: "
                               f"{', '.join(metrics) or 'none'})")
        if result.nothing_compared:
            continue  # the one line of nothing_compared says it
        if not result.comparable:
            result.failures.append(f"{pattern}: runs are not comparable, cannot check (pass "
                                   "--allow-env-mismatch to compare anyway)")
            continue
        if kernel:
            _check_kernel_rule(result, pattern, pct)
            continue
        failing = [r for r in rows if r.mark == "!"]
        result.failures += [f"{r.cell} {r.metric}: newly failing" for r in failing]
        measured = [r for r in rows if r.difference is not None]
        if not measured and not failing:
            result.failures.append(f"{pattern}: no pair of cells measured it in both runs, "
                                   "nothing to check; gate a metric both runs measure, or pair "
                                   "the cells that do with --pair/--match")
        for r in measured:
            pct_worse = worse_pct(r)
            if pct_worse > pct and (r.significant or r.p_value is None):
                result.failures.append(_gate_line(r, pct_worse, pct))


def _nothing_compared(a: Run, b: Run) -> str:
    return (f"no cell of {a.path} pairs with a cell of {b.path}, nothing was compared (A: "
            f"{cell_pairs.names(list(a.cells))}; B: {cell_pairs.names(list(b.cells))}); pair "
            "them with --pair A_CELL B_CELL or --match KEY[,KEY]")


def _self_pairs(a: Run, b: Run, pairs: list[tuple[str, str]], asked: bool) -> str:
    """Why the comparison measures nothing where cells are set against themselves (a run
    compared with itself), else ``""``."""
    same = [x for x, y in pairs if x == y] if a.path.resolve() == b.path.resolve() else []
    if not same:
        return ""
    if asked:
        return (f"--pair {same[0]} {same[0]} sets a cell of {a.path} against itself, which "
                "measures nothing (every difference is 0): pair two different cells of the run, "
                "or pass two runs")
    return (f"{a.path} and {b.path} are the same run: each cell is compared with itself, which "
            "measures nothing (every difference is 0): pass the baseline run and the candidate "
            "run, or --pair two cells of this run")


def compare(a_path: Path, b_path: Path, factor: float = 1.1, alpha: float = 0.05,
            fail_on: list[str] | None = None, allow_env_mismatch: bool = False,
            pairs: list[tuple[str, str]] | None = None, match: list[str] | None = None,
            floor_runs: str | None = None) -> Result:
    """Compare run B with run A; ``pairs`` (``--pair``) and ``match`` (``--match``) say which
    cells to set against each other (:func:`.cell_pairs.pair`); ``floor_runs``
    (``--noise-floor``) is the A/A run, or two, that gives each row its noise floor."""
    _check_threshold("--factor", factor, factor >= 1, "a finite number >= 1 (1.1 flags "
                     "changes beyond 10%)")
    _check_threshold("--alpha", alpha, 0 < alpha < 1, "a significance level between 0 and 1, "
                     "e.g. 0.05")
    rules = parse_fail_on(fail_on or [])
    a, b = load_run(a_path), load_run(b_path)
    try:
        floor = (noise_floor.measure(floor_runs, alpha, list(a.cells.values()))
                 if floor_runs is not None else None)
    except noise_floor.NoiseFloorError as exc:
        raise CompareError(str(exc)) from None
    try:
        pairing = cell_pairs.pair(list(a.cells.values()), list(b.cells.values()), pairs or (),
                                  match, one_run=a.path.resolve() == b.path.resolve())
    except cell_pairs.PairingError as exc:
        raise CompareError(str(exc)) from None
    itself = _self_pairs(a, b, pairing.pairs, bool(pairs))
    if itself and rules:
        raise CompareError(f"{itself}; a gate on it would pass whatever the code did")
    diffs = environment_differences(a, b)
    comparable = allow_env_mismatch or not diffs
    result = Result(str(a.path), str(b.path), factor, alpha, significance.TEST_NAME,
                    comparable, diffs, run_differences(a, b, diffs, pairing), pairing.text,
                    noise_floor=floor.source if floor else "", self_compared=itself)
    if not pairing.pairs:
        result.nothing_compared = _nothing_compared(a, b)
    metrics = sorted({m for _, m in (*a.values, *b.values)},
                     key=lambda m: (m != WALL, m))
    cells = [*pairing.pairs, *((n, None) for n in pairing.only_baseline),
             *((None, n) for n in pairing.only_candidate)]
    for pair in cells:
        for metric in metrics:
            row = _row(a, b, pair, metric, comparable)
            if row is not None:
                result.rows.append(row)
    _test(a, b, result.rows, factor, alpha, floor)
    _kernels(result, a, b, pairing.pairs, floor_runs)
    _check_fail_on(result, rules)
    return result


def _kernels(result: Result, a: Run, b: Run, pairs: list[tuple[str, str]],
             floor_runs: str | None) -> None:
    """The kernel rows of the paired cells, where both runs kept kernel tables."""
    ka, kb = kernel_changes.load_pair(a.path, b.path, list(a.cells.values()),
                                      list(b.cells.values()))
    result.kernel_notes += ka.problems + kb.problems
    if not (ka.values and kb.values):
        return
    floor = None
    if floor_runs is not None:
        try:
            floor = noise_floor.measure(floor_runs, result.alpha, list(a.cells.values()),
                                        read=kernel_changes.values_of)
        except noise_floor.NoiseFloorError as exc:
            result.kernel_notes.append(f"kernel rows without a noise floor: {exc}")
    result.kernels = kernel_changes.changes(ka, kb, pairs, result.alpha, floor)
    result.kernel_summaries = kernel_changes.summaries(result.kernels, a.values, b.values,
                                                       result.alpha)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _ratio_text(row: Row) -> str:
    """The ratio, or the signed difference where the baseline (0 or below) has no ratio."""
    if row.ratio is None and row.difference is not None:
        return f"Δ {row.difference:+.4g}"
    return _num(row.ratio)


def _floor_text(row: Row) -> str:
    return "—" if row.noise_floor is None else f"{row.noise_floor * 100:.3g} %"


def _difference_lines(result: Result) -> list[str]:
    """What differs, before any metric: each aspect's lines, at most :data:`MAX_CELL_LINES`
    per-cell ones each (``--json`` holds them all)."""
    if not result.differences:
        return ["Same commands, collectors, options and environment.", ""]
    lines, per_aspect = ["**What differs between the two runs:**", ""], {}
    for d in result.differences:
        shown = per_aspect[d.aspect, d.key] = per_aspect.get((d.aspect, d.key), 0) + 1
        if d.cell is None or shown <= MAX_CELL_LINES:
            lines.append(f"- {d.describe(md_code, md_text)}")
    for (aspect, key), n in per_aspect.items():
        if n > MAX_CELL_LINES:
            lines.append(f"- ... and {n - MAX_CELL_LINES} more cell(s) that differ in "
                         f"{md_text(key or aspect)} (--json lists them all)")
    return [*lines, ""]


def markdown(result: Result, only_changed: bool = False) -> str:
    lines = [f"baseline: {md_code(result.baseline)}  ",
             f"candidate: {md_code(result.candidate)}  ",
             f"factor {result.factor:g}, significance: {result.test}; significant: q ≤ alpha "
             f"{result.alpha:g}{' and beyond the noise floor' if result.noise_floor else ''} "
             f"(when both sides have ≥ {significance.min_trials(result.alpha)} passing trials)  ",
             f"noise floor: {md_text(result.noise_floor) if result.noise_floor else 'none'}",
             ""]
    if result.self_compared:
        lines += [f"**{md_text(result.self_compared)}.**", ""]
    lines += _difference_lines(result)
    lines += [md_text(result.pairing), ""]
    if result.environment_differences:
        state = "compared anyway" if result.comparable else "not comparable"
        lines += [f"**Environments differ ({state}):**", "",
                  *(f"- {md_text(d)}" for d in result.environment_differences), ""]
    if result.kernels:
        lines += kernel_section.markdown_lines(
            result.kernels, result.kernel_summaries, result.alpha, bool(result.noise_floor),
            significance.min_trials(result.alpha))
    lines += [f"- {md_text(n)}" for n in result.kernel_notes]
    lines += ["## Metrics", "",
              "| | cell | metric | baseline | candidate | ratio | Δ [95 % CI] | p | q | floor "
              "| better |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in result.rows:
        if only_changed and r.mark == " ":
            continue
        mark = f"`{r.mark}`" if r.mark != " " else ""
        ratio = _ratio_text(r) + (f" ({md_text(r.note)})" if r.note else "")
        p = _num(r.p_value) if r.p_value is not None or not r.untested else r.untested
        delta = significance.interval_text(r.difference, r.ci_low, r.ci_high)
        lines.append(f"| {mark} | {md_text(r.cell)} | {md_text(r.metric)} | "
                     f"{_num(r.baseline)} (n={r.n_baseline})"
                     f" | {_num(r.candidate)} (n={r.n_candidate}) | {ratio} | {delta} | "
                     f"{p} | {_num(r.q)} | {_floor_text(r)} | {r.better} |")
    counts = {m: sum(r.mark == m for r in result.rows) for m in "+-~!*x"}
    lines += ["", "marks: " + ", ".join(f"`{m}` {n}" for m, n in counts.items()),
              "(`+` worse, `-` better, `~` past the factor but not significant, `!` newly "
              "failing, `*` fixed, `x` not comparable)"]
    return "\n".join(lines) + "\n"


_COLORS = {"+": "#c0392b", "-": "#27ae60", "~": "#e67e22", " ": "#7f8c8d"}


def write_html(result: Result, path: Path, pngs: bool | None = None) -> str | None:
    """The comparison as a page: the table and a ratio chart (log scale)."""
    from aorta_core.reports.figures import figure, pngs_asked, pngs_wanted
    from aorta_core.reports.html import Page

    page = Page("aorta comparison")
    page.paragraph(f"baseline {result.baseline} — candidate {result.candidate} — factor "
                   f"{result.factor:g} — {result.test}, significant: q ≤ {result.alpha:g}"
                   + (f" and beyond the noise floor of {result.noise_floor}"
                      if result.noise_floor else ""), "note")
    page.heading("What differs between the two runs")
    page.bullets([d.text for d in result.differences]
                 or ["Same commands, collectors, options and environment."])
    page.paragraph(result.pairing, "note")
    if result.nothing_compared:
        page.paragraph(result.nothing_compared, "bad")
    if result.environment_differences:
        page.heading("Environments differ" + ("" if result.comparable else ": not comparable"))
        page.bullets(result.environment_differences)
    if result.failures:
        page.heading("--fail-on")
        page.bullets(result.failures)
    if result.kernels:
        kernel_section.html_section(page, result.kernels, result.kernel_summaries,
                                    result.alpha, bool(result.noise_floor),
                                    significance.min_trials(result.alpha))
    if result.kernel_notes:
        page.bullets(result.kernel_notes)
    shown = [r for r in result.rows if r.ratio is not None and r.ratio > 0]
    if shown:
        page.figure("ratios", figure(
            [{"type": "bar", "orientation": "h", "x": [r.ratio for r in shown],
              "y": [f"{r.cell} · {r.metric}" for r in shown],
              "marker": {"color": [_COLORS.get(r.mark, "#95a5a6") for r in shown]},
              "text": [r.mark.strip() for r in shown], "textposition": "outside"}],
            "candidate / baseline (red: worse, green: better, orange: not significant)",
            "ratio (log scale)", "", xaxis={"type": "log", "title": {"text": "ratio"}},
            height=max(300, 28 * len(shown) + 150)))
    page.heading("Rows")
    page.table(["mark", "cell", "metric", "baseline", "candidate", "ratio", "difference",
                "CI low", "CI high", "p", "q", "noise floor", "significant", "better", "note"],
               [[r.mark, r.cell, r.metric, r.baseline, r.candidate, r.ratio, r.difference,
                 r.ci_low, r.ci_high, r.p_value if r.p_value is not None else r.untested, r.q,
                 r.noise_floor, "yes" if r.significant else "no", r.better, r.note]
                for r in result.rows])
    png_dir = path.with_name(f"{path.stem}_png") if pngs_wanted(pngs) else None
    return page.write(path, png_dir, asked=pngs_asked(pngs))
