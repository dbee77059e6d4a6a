"""report.html's "Top kernels and operators": every list among the cells' metrics (top kernels,
torchprof's top CPU operators, any collector's or workload's), found by shape as perf.md finds
them (:func:`~aorta_core.engine.perfmd.list_metrics`), one table each, ranks against cells laid
out by the same rule, from each cell's first passing trial."""

from __future__ import annotations

import html
from typing import Any

from aorta_core.engine.perfmd import list_metrics
from aorta_core.engine.tables import orient
from aorta_core.reports.cell_tables import PAGE_WIDTH
from aorta_core.reports.html import Markup, Page
from aorta_core.reports.metric_names import shown_name

#: Characters of a listed name shown (a C++ kernel's can be thousands); hover shows it whole.
MAX_NAME = 100


def _name(text: str) -> Markup:
    cut = text if len(text) <= MAX_NAME else text[:MAX_NAME - 1] + "…"
    title = f" title='{html.escape(text, quote=True)}'" if cut != text else ""
    return Markup(f"<span{title}>{html.escape(cut)}</span>")


def lists_section(page: Page, matrix: dict[str, Any]) -> None:
    lists = list_metrics(matrix["cells"])
    if not lists:
        return
    page.heading("Top kernels and operators")
    page.paragraph("Each list the cells' metrics hold, in the order the collector or workload "
                   "gave it (top lists: hottest first), from each cell's first passing trial "
                   "(metrics_text in matrix.json); a long name is cut, hover shows it whole.",
                   "note")
    for metric, having in lists:
        ranks = max((len(v) for _, v in having), default=0)
        texts = [[str(v) for v in items] + [""] * (ranks - len(items)) for _, items in having]
        shown = [[t if len(t) <= MAX_NAME else t[:MAX_NAME] for t in row] for row in texts]
        layout = orient([n for n, _ in having], [str(r + 1) for r in range(ranks)], shown,
                        PAGE_WIDTH, field_corner="#")
        page.heading(f"{shown_name(metric)} ({metric})", 3)
        if layout.transposed:
            rows = [[r + 1, *(_name(row[r]) for row in texts)] for r in range(ranks)]
            page.table(["#", *layout.header[1:]], rows)
        else:
            page.table(["cell", *map(str, range(1, ranks + 1))],
                       [[n, *map(_name, row)] for (n, _), row in zip(having, texts,
                                                                     strict=True)])
