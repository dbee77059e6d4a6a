"""report.html's trial spread: one box plot per metric that differs between cells (constant and
unmeasured ones are folded into lines by :mod:`~aorta_core.reports.cell_tables`), in group
order, every passing trial a point. The sweep's first axis whose value differs between cells
is the x-axis (its values, not cell names); the next ones make one coloured box per value
combination. A sweep without
axes (``sweep=repeat``) has one box per cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aorta_core.engine.matrix import WALL
from aorta_core.reports.cell_tables import Kinds, collectors
from aorta_core.reports.figures import figure
from aorta_core.reports.html import Page
from aorta_core.reports.matrix_files import passing_values
from aorta_core.reports.metric_names import grouped, shown_name

MAX_SPREAD_FIGURES = 30


def _positions(matrix: dict[str, Any]) -> tuple[str, dict[str, tuple[str, str]]]:
    """The x-axis title, and per cell its x value and its trace (``""``: one trace)."""
    axes = [a for a in matrix.get("axes") or [] if isinstance(a, str)]
    # An axis with one value in every cell (an override given once) tells no cell apart.
    axes = [a for a in axes if len({str((c.get("axes") or {}).get(a))
                                    for c in matrix["cells"]}) > 1] or axes
    where = {}
    for cell in matrix["cells"]:
        values = cell.get("axes") or {}
        if not axes:
            where[cell["cell"]] = (cell["cell"], "")
            continue
        first = values.get(axes[0])
        rest = ", ".join(f"{a.rsplit('.', 1)[-1]}={values.get(a)}" for a in axes[1:])
        where[cell["cell"]] = (cell["cell"] if first is None else str(first), rest)
    return (axes[0] if axes else "cell"), where


def spread_section(page: Page, output: Path, matrix: dict[str, Any], found: Kinds) -> None:
    import polars as pl

    page.heading("Trial spread per metric (passing trials)")
    long = passing_values(output)  # from its bytes: polars reads a path as a glob ('runs[1]')
    present = set(long["metric"].unique().to_list())
    order = [m for _, ms in grouped(found.varying, collectors(matrix)) for m in ms]
    metrics = [m for m in order if m in present]
    if WALL in metrics:
        metrics = [WALL, *(m for m in metrics if m != WALL)]
    if not metrics:
        page.paragraph("No metric differs between cells or trials.", "note")
    x_title, where = _positions(matrix)
    traces = list(dict.fromkeys(trace for _, trace in where.values()))
    for metric in metrics[:MAX_SPREAD_FIGURES]:
        sub = long.filter(pl.col("metric") == metric)
        data = []
        for trace in traces:
            xs, ys = [], []
            for cell, (x, t) in where.items():
                if t == trace:
                    values = sub.filter(pl.col("cell") == cell)["value"].to_list()
                    xs += [x] * len(values)
                    ys += values
            if ys:
                data.append({"type": "box", "name": trace or shown_name(metric), "x": xs,
                             "y": ys, "boxpoints": "all", "jitter": 0.3, "pointpos": 0})
        page.figure(f"spread_{metric}", figure(
            data, shown_name(metric), x_title, shown_name(metric),
            showlegend=len(traces) > 1, boxmode="group",
            xaxis={"title": {"text": x_title}, "type": "category", "automargin": True,
                   "gridcolor": "#e5e5e5", "linecolor": "#999"}, height=360))
    if len(metrics) > MAX_SPREAD_FIGURES:
        more = metrics[MAX_SPREAD_FIGURES:]
        named = ", ".join(more[:MAX_SPREAD_FIGURES]) + (", …" if len(more) > MAX_SPREAD_FIGURES
                                                         else "")
        page.paragraph(f"{len(more)} more metric(s) not plotted: {named}; matrix.parquet has "
                       "them.", "note")
