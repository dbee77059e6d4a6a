"""``aorta compare <run A> <run B>``: per cell and metric, baseline vs candidate, asv's marks.

Marks (as asv): ``+`` worse by more than the factor and significant, ``-`` better likewise,
``~`` past the factor but not significant, ``!`` newly failing (A measured it, B's cell has no
passing trial), ``*`` fixed (the reverse), ``x`` not comparable (different environment, or the
metric/cell exists on one side only for another reason), blank: within the factor.
Values are medians of the passing trials' per-trial values in ``matrix.parquet``.
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aorta_core.engine.matrix import WALL
from aorta_core.engine.perfmd import md_code, md_text
from aorta_core.reports import significance
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
    cell: str
    metric: str
    mark: str
    baseline: float | None
    candidate: float | None
    ratio: float | None
    p_value: float | None
    n_baseline: int
    n_candidate: int
    better: str
    note: str = ""


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
    rows: list[Row] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

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


def run_differences(a: Run, b: Run, env_diffs: list[str]) -> list[Difference]:
    """Everything that differs between the runs (:mod:`.run_differences`); those among
    ``env_diffs`` (:func:`environment_differences`) are marked as making them not comparable."""
    blocking = {d.split(": ", 1)[0] for d in env_diffs}
    return differences((a.path, a.matrix), (b.path, b.matrix),
                       _used_collectors(a) | _used_collectors(b), blocking)


def _failed(run: Run, cell: str) -> bool:
    c = run.cells.get(cell) or {}
    trials = c.get("trials") or {}
    return bool(c.get("error") or trials.get("fail") or trials.get("error"))


def _mark(ratio: float | None, higher: bool, factor: float,
          p: float | None, alpha: float) -> str:
    if ratio is None:
        return " "
    worse = ratio < 1 / factor if higher else ratio > factor
    better = ratio > factor if higher else ratio < 1 / factor
    if not (worse or better):
        return " "
    if p is not None and p >= alpha:
        return "~"
    return "+" if worse else "-"


def _ratio(base: float, cand: float) -> float | None:
    if base == 0:
        return 1.0 if cand == 0 else None
    return cand / base


def _row(a: Run, b: Run, cell: str, metric: str, comparable: bool, factor: float,
         alpha: float) -> Row | None:
    va, vb = a.values.get((cell, metric), []), b.values.get((cell, metric), [])
    higher = higher_is_better(metric)
    base = statistics.median(va) if va else None
    cand = statistics.median(vb) if vb else None
    row = Row(cell, metric, " ", base, cand, None, None, len(va), len(vb),
              "higher" if higher else "lower")
    if not va and not vb:
        return None
    if cell not in a.cells or cell not in b.cells:
        side = "candidate" if cell not in a.cells else "baseline"
        row.mark, row.note = "x", f"cell only in {side}"
        return row
    if not comparable:
        row.mark, row.note = "x", "different environment"
    elif va and not vb:
        row.mark, row.note = ("!", "no passing trial") if _failed(b, cell) else (
            "x", "not measured")
    elif vb and not va:
        row.mark, row.note = ("*", "baseline had no passing trial") if _failed(a, cell) else (
            "x", "not measured in baseline")
    if va and vb:
        row.ratio = _ratio(base, cand)
        row.p_value = significance.welch_p(va, vb)
        if row.mark == " ":
            row.mark = _mark(row.ratio, higher, factor, row.p_value, alpha)
    return row


def worse_pct(row: Row) -> float | None:
    """How much worse the candidate is, in percent (negative: better)."""
    if row.ratio is None:
        return None
    if row.better == "higher":
        return (1.0 - row.ratio) * 100.0
    return (row.ratio - 1.0) * 100.0


def parse_fail_on(specs: list[str]) -> list[tuple[str, float]]:
    out = []
    for spec in specs:
        metric, _, pct = spec.rpartition(":")
        try:
            value = float(pct)
        except ValueError:
            value = -1.0
        if not metric or value < 0:
            raise CompareError(f"--fail-on {spec!r}: expected <metric>:<percent>, e.g. "
                               "workload_step_time_ms:5 (the metric may be a glob)")
        out.append((metric, value))
    return out


def _check_fail_on(result: Result, rules: list[tuple[str, float]]) -> None:
    for pattern, pct in rules:
        rows = [r for r in result.rows if fnmatch.fnmatchcase(r.metric, pattern)]
        if not rows:
            metrics = sorted({r.metric for r in result.rows})
            raise CompareError(f"--fail-on {pattern}: no such metric in either run (metrics: "
                               f"{', '.join(metrics) or 'none'})")
        if not result.comparable:
            result.failures.append(f"{pattern}: runs are not comparable, cannot check (pass "
                                   "--allow-env-mismatch to compare anyway)")
            continue
        for r in rows:
            pct_worse = worse_pct(r)
            if r.mark == "!":
                result.failures.append(f"{r.cell} {r.metric}: newly failing")
            elif (pct_worse is not None and pct_worse > pct
                  and (r.p_value is None or r.p_value < result.alpha)):
                result.failures.append(f"{r.cell} {r.metric}: {pct_worse:.1f}% worse "
                                       f"(limit {pct:g}%)")


def compare(a_path: Path, b_path: Path, factor: float = 1.1, alpha: float = 0.05,
            fail_on: list[str] | None = None, allow_env_mismatch: bool = False) -> Result:
    if factor < 1:
        raise CompareError(f"--factor {factor}: must be >= 1 (1.1 flags changes beyond 10%)")
    rules = parse_fail_on(fail_on or [])
    a, b = load_run(a_path), load_run(b_path)
    diffs = environment_differences(a, b)
    comparable = allow_env_mismatch or not diffs
    result = Result(str(a.path), str(b.path), factor, alpha, significance.implementation(),
                    comparable, diffs, run_differences(a, b, diffs))
    cells = list(dict.fromkeys([*a.cells, *b.cells]))
    metrics = sorted({m for _, m in (*a.values, *b.values)},
                     key=lambda m: (m != WALL, m))
    for cell in cells:
        for metric in metrics:
            row = _row(a, b, cell, metric, comparable, factor, alpha)
            if row is not None:
                result.rows.append(row)
    _check_fail_on(result, rules)
    return result


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


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
             f"factor {result.factor:g}, significance: {result.test}, alpha {result.alpha:g} "
             "(when both sides have >= 2 passing trials)", ""]
    lines += _difference_lines(result)
    if result.environment_differences:
        state = "compared anyway" if result.comparable else "not comparable"
        lines += [f"**Environments differ ({state}):**", "",
                  *(f"- {md_text(d)}" for d in result.environment_differences), ""]
    lines += ["| | cell | metric | baseline | candidate | ratio | p | better |",
              "|---|---|---|---:|---:|---:|---:|---|"]
    for r in result.rows:
        if only_changed and r.mark == " ":
            continue
        mark = f"`{r.mark}`" if r.mark != " " else ""
        ratio = _num(r.ratio) + (f" ({md_text(r.note)})" if r.note else "")
        lines.append(f"| {mark} | {md_text(r.cell)} | {md_text(r.metric)} | "
                     f"{_num(r.baseline)} (n={r.n_baseline})"
                     f" | {_num(r.candidate)} (n={r.n_candidate}) | {ratio} | "
                     f"{_num(r.p_value)} | {r.better} |")
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
                   f"{result.factor:g} — {result.test}, alpha {result.alpha:g}", "note")
    page.heading("What differs between the two runs")
    page.bullets([d.text for d in result.differences]
                 or ["Same commands, collectors, options and environment."])
    if result.environment_differences:
        page.heading("Environments differ" + ("" if result.comparable else ": not comparable"))
        page.bullets(result.environment_differences)
    if result.failures:
        page.heading("--fail-on")
        page.bullets(result.failures)
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
    page.table(["mark", "cell", "metric", "baseline", "candidate", "ratio", "p", "better",
                "note"],
               [[r.mark, r.cell, r.metric, r.baseline, r.candidate, r.ratio, r.p_value,
                 r.better, r.note] for r in result.rows])
    png_dir = path.with_name(f"{path.stem}_png") if pngs_wanted(pngs) else None
    return page.write(path, png_dir, asked=pngs_asked(pngs))
