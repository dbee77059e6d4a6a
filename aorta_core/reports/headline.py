"""The headline of report.html: the few metrics that answer the sweep's question, each cell
against the sweep's baseline cell, with the difference and whether it is significant.

Which metrics: a declared rule (:data:`HEADLINE_RULE`), never one run's names. Each entry is a
list of name patterns tried in order; for each source (the metric's prefix: ``workload``, a
collector's name) the first pattern that matches any of its metrics gives that source's shortest
matching name (``workload_tflops`` before ``workload_compute_tflops``). A sweep none of whose
metrics match shows the wall time. The collector contract (``aorta_core.api``) declares no
headline metric, so collectors' metrics are chosen by the same patterns (``*_gpu_time_ms``,
``*_top_kernel_ms``); the first entry of their lists (``*_top_kernels``, ``*_top_cpu_ops``) is
shown as the hottest. A ``sweep=agree`` leads with its verdicts (``agreement.json``).

The baseline: the bare cell of a ``sweep=agree`` (the recipe compares every collector with it),
else the sweep's first cell in matrix.json. Differences are of medians; significance is the
two-sided Mann–Whitney U test on the trials' values (matrix.parquet) with Benjamini–Hochberg
q-values over the headline's tested rows, q ≤ :data:`ALPHA`, as ``aorta compare`` tests, and
like it makes no claim below :func:`.significance.min_trials` trials a side ("inconclusive").
"""

from __future__ import annotations

import fnmatch
import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aorta_core.api.oneline import exception_line
from aorta_core.engine.matrix import WALL
from aorta_core.engine.perfmd import NOT_MEASURED
from aorta_core.engine.progress import short_names
from aorta_core.engine.records import read_json
from aorta_core.reports import kernel_changes, kernel_section
from aorta_core.reports.agreement import AGREEMENT_NAME
from aorta_core.reports.compare import higher_is_better
from aorta_core.reports.html import Markup, Page, fmt
from aorta_core.reports.matrix_files import BadMatrix, passing_values
from aorta_core.reports.metric_names import shown_name
from aorta_core.reports.significance import compare_rows, inconclusive, min_trials

#: (what it answers, name patterns tried in order). Order is the headline's order.
HEADLINE_RULE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("throughput", ("*tokens_per_s", "*samples_per_s", "*_per_s")),
    ("FLOP rate", ("*_tflops", "*_gflops")),
    ("step time", ("*step_time_ms", "*step_ms", "*_ms_per_step")),
    ("compute fraction", ("*compute_fraction",)),
    ("overlap", ("*overlap_ratio",)),
    ("GPU time", ("*_gpu_time_ms",)),
    ("hottest kernel time", ("*_top_kernel_ms",)),
    ("CPU operator time", ("*_cpu_op_ms",)),
)
#: Lists whose first entry (the hottest) the headline names per cell.
HEADLINE_LISTS = ("*_top_kernels", "*_top_cpu_ops")
MAX_METRICS = 10
ALPHA = 0.05
#: Characters of a listed name shown in the headline (C++ kernel names run to thousands).
MAX_NAME = 80
#: What a row says whose trials' values are missing (no readable matrix.parquet).
NO_VALUES = "not tested: matrix.parquet holds no trial values (rebuild it with aorta matrix)"
#: Characters a cell's name is shortened to (to what tells the cells apart; whole on hover).
NAME_WIDTH = 32


@dataclass(frozen=True)
class Baseline:
    cell: str
    why: str


def summaries(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's ``metrics_summary`` with its wall time, ``{}`` where matrix.json lists them
    (too many sparse names for a column each)."""
    summary = cell.get("metrics_summary")
    summary = summary if isinstance(summary, dict) else {}
    wall = cell.get(WALL)
    return {WALL: wall, **summary} if isinstance(wall, dict) else dict(summary)


def _median(stats: Any) -> float | None:
    return stats.get("median") if isinstance(stats, dict) else None


def baseline(matrix: dict[str, Any]) -> Baseline | None:
    cells = matrix["cells"]
    if not cells:
        return None
    bare = [c["cell"] for c in cells
            if isinstance(c.get("agree"), dict) and c["agree"].get("collector") is None]
    if bare:
        return Baseline(bare[0], "the bare cell: sweep=agree compares every collector with it")
    return Baseline(cells[0]["cell"], "the sweep's first cell in matrix.json")


def _source(metric: str) -> str:
    return metric.partition("_")[0]


def headline_metrics(matrix: dict[str, Any]) -> list[str]:
    """The metrics :data:`HEADLINE_RULE` picks from the cells' numeric metrics that have a
    value; with more than one cell, only those measured in two cells or more (one to compare
    with); at most :data:`MAX_METRICS`."""
    cells = matrix["cells"]
    counts: dict[str, int] = {}
    for cell in cells:
        for metric, stats in summaries(cell).items():
            if metric != WALL and _median(stats) is not None:
                counts[metric] = counts.get(metric, 0) + 1
    by_source: dict[str, list[str]] = {}
    for metric in sorted(m for m, n in counts.items() if len(cells) < 2 or n >= 2):
        by_source.setdefault(_source(metric), []).append(metric)
    chosen: list[str] = []
    for _, patterns in HEADLINE_RULE:
        for source in sorted(by_source):
            own = [m for m in by_source[source] if m not in chosen]
            for pattern in patterns:
                if matches := [m for m in own if fnmatch.fnmatchcase(m, pattern)]:
                    chosen.append(min(matches, key=lambda m: (len(m), m)))
                    break
    return chosen[:MAX_METRICS] or [WALL]


def headline_lists(matrix: dict[str, Any]) -> list[str]:
    """The list-valued metrics (:data:`HEADLINE_LISTS`) any cell holds."""
    names = {m for c in matrix["cells"] for m, v in (c.get("metrics_text") or {}).items()
             if isinstance(v, list) and v}
    return sorted(m for m in names if any(fnmatch.fnmatchcase(m, p) for p in HEADLINE_LISTS))


@dataclass(frozen=True)
class Row:
    """One cell's value of one headline metric against the baseline's."""

    metric: str
    cell: str
    median: float | None
    std: float | None
    n: int | None
    delta: float | None = None
    delta_pct: float | None = None
    p_value: float | None = None
    q: float | None = None
    significant: bool = False
    better: bool | None = None  # None: no difference to judge
    #: Why the row was not tested (:func:`.significance.inconclusive`, values missing).
    untested: str = ""

    @property
    def significance(self) -> str:
        if self.delta is None:
            return ""
        if self.untested:
            return self.untested
        word = "significant" if self.significant else "not significant"
        return f"{word} (p = {self.p_value:.2g}, q = {self.q:.2g})"


def trial_values(output: Path) -> dict[tuple[str, str], list[float]]:
    """(cell, metric) -> the passing trials' values (``{}`` when matrix.parquet cannot be read:
    the rows then say they were not tested)."""
    try:
        long = passing_values(output)
    except BadMatrix:
        return {}
    return {key: part["value"].to_list()
            for key, part in long.group_by("cell", "metric", maintain_order=True)}


def compared(matrix: dict[str, Any], base: Baseline) -> list[dict[str, Any]]:
    """The cells the headline shows: the baseline and every cell with a passing trial (one that
    could not run or failed every trial is named, not shown as rows of 'not measured')."""
    return [c for c in matrix["cells"]
            if c["cell"] == base.cell or (c.get("trials") or {}).get("pass")]


def rows(matrix: dict[str, Any], base: Baseline, metrics: Sequence[str],
         values: dict[tuple[str, str], list[float]]) -> list[Row]:
    """Each headline metric of each shown cell; the cells' differences from the baseline are
    tested together, one family (``values``: :func:`trial_values`)."""
    by_name = {c["cell"]: summaries(c) for c in compared(matrix, base)}
    reference = by_name.get(base.cell, {})
    out, tested = [], []
    for metric in metrics:
        ref_median = _median(reference.get(metric))
        for cell, summary in by_name.items():
            stats = summary.get(metric)
            median = _median(stats)
            row = Row(metric, cell, median, (stats or {}).get("std"), (stats or {}).get("n"))
            if cell != base.cell and median is not None and ref_median is not None:
                delta = median - ref_median
                good = delta > 0 if higher_is_better(metric) else delta < 0
                row = Row(metric, cell, median, row.std, row.n, delta,
                          delta / abs(ref_median) * 100 if ref_median else None,
                          better=None if delta == 0 else good)
                tested.append(len(out))
            out.append(row)
    stats = compare_rows([values.get((base.cell, out[i].metric), []) for i in tested],
                         [values.get((out[i].cell, out[i].metric), []) for i in tested], ALPHA)
    ref_n = {m: (reference.get(m) or {}).get("n") or 0 for m in metrics}
    for i, s in zip(tested, stats, strict=True):
        untested = s.untested
        if s.p is None and not (values.get((base.cell, out[i].metric))
                                and values.get((out[i].cell, out[i].metric))):
            # no trial values (matrix.parquet missing): the counts of matrix.json still say
            # whether a test could have been made
            few = min(out[i].n or 0, ref_n[out[i].metric]) < min_trials(ALPHA)
            untested = inconclusive(ALPHA) if few else NO_VALUES
        out[i] = replace(out[i], p_value=s.p, q=s.q, significant=s.significant,
                         untested=untested)
    return out


def _value(row: Row) -> str:
    if row.median is None:
        return NOT_MEASURED
    text = fmt(row.median)
    if row.n and row.n > 1 and row.std is not None:
        text += f" ± {fmt(row.std)}"
    return f"{text} (n={row.n})"


def _signed(value: float | None, suffix: str = "") -> str:
    if value is None:
        return ""
    return f"{'+' if value > 0 else ''}{fmt(value)}{suffix}"


def _verdicts(output: Path) -> list[tuple[str, str, str]]:
    """(what, status, verdict) of agreement.json: each metric's, then each overhead's."""
    data = read_json(output / AGREEMENT_NAME)
    if not isinstance(data, dict):
        raise ValueError(f"{AGREEMENT_NAME} holds {type(data).__name__}, not an object")
    out = []
    for metric, entry in (data.get("metrics") or {}).items():
        if isinstance(entry, dict):
            out.append((metric, str(entry.get("status") or ""), str(entry.get("verdict") or "")))
    for name, entry in (data.get("overhead") or {}).items():
        if isinstance(entry, dict):
            out.append((f"{name} overhead", "agree" if entry.get("significant") is False else
                        "", str(entry.get("verdict") or "")))
    return out


def _cell_name(cell: str, short: str, base: bool) -> Markup:
    """A cell's name as it fits (shortened to what tells the cells apart), whole on hover."""
    title = f" title='{html.escape(cell, quote=True)}'" if short != cell else ""
    return Markup(f"<span{title}>{html.escape(short)}</span>{' (baseline)' if base else ''}")


def _status_css(status: str) -> str:
    return {"agree": "good", "disagree": "bad"}.get(status, "")


def headline_section(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    """The headline: baseline, agree verdicts (``sweep=agree``), then the table of the
    headline metrics, every cell against the baseline, and the hottest entry of each list;
    none when no trial passed (nothing was measured: "What went wrong" above says why)."""
    if matrix["cells"] and not any((c.get("trials") or {}).get("pass") for c in matrix["cells"]):
        return
    page.begin("headline")
    page.heading("Headline")
    base = baseline(matrix)
    if base is None:
        page.paragraph("The sweep has no cell.", "note")
        page.end()
        return
    cells = [c["cell"] for c in matrix["cells"]]
    shown = dict(zip(cells, short_names(cells, NAME_WIDTH), strict=True))
    if len(cells) > 1:
        page.paragraph(Markup(
            f"Baseline: <strong>{html.escape(base.cell)}</strong> ({html.escape(base.why)}). "
            f"Each other cell's difference is its median minus the baseline's; significant: "
            f"the two-sided Mann–Whitney U test on the trials, its Benjamini–Hochberg q over "
            f"the rows below ≤ {ALPHA}, made with at least {min_trials(ALPHA)} trials on each "
            f"side; a significant difference is green when better, red when worse."))
    else:
        page.paragraph("One cell: nothing to compare it with.", "note")
    shown_cells = {c["cell"] for c in compared(matrix, base)}
    if left := [c for c in cells if c not in shown_cells]:
        page.paragraph(f"Not in the headline (no passing trial): {', '.join(left)}.", "note")
    if any(isinstance(c.get("agree"), dict) for c in matrix["cells"]):
        if (output / AGREEMENT_NAME).is_file():
            try:
                verdicts = _verdicts(output)
            except Exception as exc:  # the rest of the headline stands without them
                verdicts = []
                page.paragraph(f"The verdicts could not be read ({exception_line(exc, 200)}); "
                               f"rebuild them with aorta agree {output}.", "bad")
            page.heading("Do the profilers agree?", 3)
            page.table(["what", "verdict"], [
                [what, Markup(f"<span class={_status_css(status)}>{html.escape(text)}</span>"
                              if _status_css(status) else html.escape(text))]
                for what, status, text in verdicts])
        else:
            page.paragraph(f"No {AGREEMENT_NAME} yet: run aorta agree {output}.", "note")
    metrics = headline_metrics(matrix)
    table = []
    for row in rows(matrix, base, metrics, trial_values(output)):
        css = "" if row.better is None or not row.significant else (
            "good" if row.better else "bad")
        delta = _signed(row.delta)
        pct = _signed(row.delta_pct, " %")
        table.append([
            Markup(f"<span title='{html.escape(row.metric, quote=True)}'>"
                   f"{html.escape(shown_name(row.metric))}</span>"),
            _cell_name(row.cell, shown[row.cell], row.cell == base.cell),
            _value(row),
            Markup(f"<span class={css}>{html.escape(delta)}</span>") if css else delta,
            Markup(f"<span class={css}>{html.escape(pct)}</span>") if css else pct,
            row.significance])
    for metric in headline_lists(matrix):
        for cell in matrix["cells"]:
            items = (cell.get("metrics_text") or {}).get(metric)
            if not (isinstance(items, list) and items):
                continue  # a cell without the list: its collector did not run there
            first = str(items[0])
            cut = first if len(first) <= MAX_NAME else first[:MAX_NAME - 1] + "…"
            table.append([Markup(f"<span title='{html.escape(metric, quote=True)}'>"
                                 f"{html.escape(shown_name(metric))}: hottest</span>"),
                          _cell_name(cell["cell"], shown[cell["cell"]], False), Markup(
                              f"<span title='{html.escape(first, quote=True)}'>"
                              f"{html.escape(cut)}</span>"), "", "", ""])
    page.table(["metric", "cell", "median ± std (n)", "Δ vs baseline", "Δ %", "significance"],
               table, css="headline")
    page.paragraph(f"Headline metrics are chosen by a rule (reports/headline.py): "
                   f"{', '.join(what for what, _ in HEADLINE_RULE)}, by their names' patterns; "
                   "every metric is in the groups below.", "note")
    _kernels(page, output, matrix, base)
    page.end()


def _kernels(page: Page, output: Path, matrix: dict[str, Any], base: Baseline) -> None:
    """Which kernels make each cell slower or faster than the baseline cell, where the trials
    kept kernel tables (:mod:`.kernel_changes`)."""
    others = [c["cell"] for c in compared(matrix, base) if c["cell"] != base.cell]
    try:
        found = kernel_changes.load(output, matrix["cells"])
    except BadMatrix:
        return  # the rows above already say the trial values are missing
    if not (others and found.values):
        return
    changes = kernel_changes.changes(found, found, [(base.cell, c) for c in others], ALPHA)
    values = trial_values(output)
    found_summaries = kernel_changes.summaries(changes, values, values, ALPHA)
    kernel_section.html_section(page, changes, found_summaries, ALPHA, False, min_trials(ALPHA),
                                level=3)
    if found.problems:
        page.bullets(found.problems)
