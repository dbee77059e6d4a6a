"""report.html's tables of the cells' numbers: the sortable cell table (axes, verdicts, wall
time and the headline metrics), then every metric in its group (throughput, time,
communication, memory, per collector) with constant and unmeasured metrics folded into one line
each.

Tables fit the page: a group's table has cells as rows, or cells as columns and metrics as rows
where that renders narrower (the rule perf.md uses, :func:`~aorta_core.engine.tables.orient`);
a value a cell does not have reads ``not measured``, never 0."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from aorta_core.engine.matrix import WALL
from aorta_core.engine.matrix_summary import table_fits
from aorta_core.engine.perfmd import NOT_MEASURED
from aorta_core.engine.progress import short_names
from aorta_core.engine.tables import orient
from aorta_core.reports.headline import NAME_WIDTH, headline_metrics, summaries
from aorta_core.reports.html import Keyed, Markup, Page, fmt, link
from aorta_core.reports.metric_names import grouped, shown_name

#: Characters of page width the tables are laid out for (about 1280 px of 0.85 rem text).
PAGE_WIDTH = 150
#: Names a folded line lists (a sweep may have thousands of constant names).
MAX_FOLDED = 100


@dataclass(frozen=True)
class Kinds:
    """The cells' metrics sorted for the page: ``constant`` (name → the one value every cell
    that ran measured in every trial), ``unmeasured`` (names no cell has a value for), and
    ``varying`` (the rest, wall time first)."""

    constant: dict[str, float]
    unmeasured: list[str]
    varying: list[str]


def kinds(matrix: dict[str, Any]) -> Kinds:
    ran = [summaries(c) for c in matrix["cells"] if (c.get("trials") or {}).get("pass")]
    names = sorted({m for s in ran for m in s})
    constant, unmeasured, varying = {}, [], []
    for metric in names:
        stats = [s.get(metric) for s in ran]
        values = [st for st in stats if isinstance(st, dict) and st.get("median") is not None]
        if not values:
            unmeasured.append(metric)
            continue
        ends = {v for st in values for v in (st.get("min"), st.get("max"))}
        if (len(values) == len(stats) and len(ends) == 1 and None not in ends
                and sum(st.get("n") or 0 for st in values) > 1):
            constant[metric] = ends.pop()
        else:
            varying.append(metric)
    if WALL in varying:
        varying.remove(WALL)
        varying.insert(0, WALL)
    return Kinds(constant, unmeasured, varying)


def _value(stats: Any, spread: bool = True) -> Keyed:
    """median (± std over more than one trial), sorted by the median; not measured."""
    median = stats.get("median") if isinstance(stats, dict) else None
    if median is None:
        return Keyed(NOT_MEASURED, None)
    text = fmt(median)
    if spread and (stats.get("n") or 0) > 1 and stats.get("std") is not None:
        text += f" ± {fmt(stats['std'])}"
    return Keyed(text, median)


def _named(metric: str) -> Markup:
    """A metric's shown name (unit spelled), its own name on hover."""
    return Markup(f"<span title='{html.escape(metric, quote=True)}'>"
                  f"{html.escape(shown_name(metric))}</span>")


def _listed(items: list[str]) -> str:
    """Up to :data:`MAX_FOLDED` items of a folded line, and how many more there are."""
    more = len(items) - MAX_FOLDED
    return ", ".join(items[:MAX_FOLDED]) + (
        f", … and {more} more (matrix.json has them)" if more > 0 else "")


def collectors(matrix: dict[str, Any]) -> set[str]:
    return {str(n) for c in matrix["cells"] for n in c.get("collectors") or []}


def cells_section(page: Page, matrix: dict[str, Any]) -> None:
    """One row per cell: name (linking to its folder), axes, pass/fail/error, wall time and the
    headline metrics' medians; sortable by any column."""
    cells = matrix["cells"]
    axes = [a for a in matrix.get("axes") or [] if isinstance(a, str)]
    metrics = [m for m in headline_metrics(matrix) if m != WALL]
    page.heading("Cells (medians over passing trials; click a header to sort)")
    rows = []
    for c, short in zip(cells, short_names([c["cell"] for c in cells], NAME_WIDTH), strict=True):
        t, summary = c.get("trials") or {}, summaries(c)
        rows.append([_hover(link(short, c.get("dir") or f"cells/{c['cell']}"), c["cell"], short),
                     *(_axis((c.get("axes") or {}).get(a)) for a in axes),
                     t.get("pass"), t.get("fail"), t.get("error"),
                     _value(summary.get(WALL), False),
                     *(_value(summary.get(m), False) for m in metrics)])
    page.table(["cell", *axes, "pass", "fail", "error", _named(WALL), *map(_named, metrics)],
               rows, sortable=True, css="cells")


def _hover(shown: str, full: str, short: str) -> Markup:
    """``shown`` (HTML), with the full name on hover where it was shortened."""
    if short == full:
        return Markup(shown)
    return Markup(f"<span title='{html.escape(full, quote=True)}'>{shown}</span>")


def _axis(value: Any) -> Any:
    """An axis value as shown; one that reads as a number (matrix.json keeps them as text:
    ``'16'``) sorts as one."""
    if value is None:
        return ""
    try:
        return Keyed(str(value), float(value))
    except (TypeError, ValueError):
        return str(value)


def metrics_section(page: Page, matrix: dict[str, Any], found: Kinds | None = None) -> None:
    """Every metric: constant and unmeasured ones in one line each, then one table per group."""
    found = found or kinds(matrix)
    cells = matrix["cells"]
    page.heading("Metrics by group (median ± sample std over passing trials)")
    if found.constant:
        page.paragraph(Markup("<strong>Same in every cell</strong> (every trial): " + _listed(
            [f"{_named(m)} = {html.escape(fmt(v))}" for m, v in found.constant.items()])),
            "fold")
    if found.unmeasured:
        page.paragraph(Markup(f"<strong>{NOT_MEASURED.capitalize()}</strong> by any passing "
                              "trial: " + _listed(list(map(_named, found.unmeasured)))), "fold")
    names = [c["cell"] for c in cells]
    by_cell = [summaries(c) for c in cells]
    entries = sum(len(s) - (WALL in s) for s in by_cell)  # as matrix.json counts them
    if not table_fits(len(cells), len(found.varying), entries):
        count = len({m for s in by_cell for m in s} - {WALL})
        page.paragraph(f"Numeric metrics: {entries} statistics of {count} names over "
                       f"{len(cells)} cells, too many names for a column each; see "
                       "metrics_summary in matrix.json and matrix.parquet.", "note")
        return
    for group, metrics in grouped(found.varying, collectors(matrix)):
        values = [[_value(s.get(m)) for m in metrics] for s in by_cell]
        layout = orient(names, [shown_name(m) for m in metrics], values, PAGE_WIDTH,
                        field_corner="metric")
        page.heading(group, 3)
        if layout.transposed:  # the header holds the cells' names, shortened to fit
            rows = [[_named(m), *(row[j] for row in values)] for j, m in enumerate(metrics)]
            page.table(["metric", *layout.header[1:]], rows, sortable=True, css="group")
        else:
            shorts = short_names(names, NAME_WIDTH)
            page.table(["cell", *map(_named, metrics)],
                       [[_hover(html.escape(s), n, s), *row]
                        for n, s, row in zip(names, shorts, values, strict=True)],
                       sortable=True, css="group")
