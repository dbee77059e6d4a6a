"""torchprof's section of the sweep report: which CPU operators a CPU-only run spends its time
in. The core's top-kernels section covers GPU traces; on a CPU run the operators are the
answer, and without this section their names reached neither report.html nor perf.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aorta_core.api import ReportSection


def cpu_operator_sections(matrix: Mapping[str, Any]) -> list[ReportSection]:
    rows = []
    for cell in matrix.get("cells", ()):
        summary = cell.get("metrics_summary")
        summary = summary if isinstance(summary, Mapping) else {}  # listed: many sparse names
        hottest_ms = (summary.get("torchprof_top_cpu_op_ms") or {}).get("median")
        total_ms = (summary.get("torchprof_cpu_op_ms") or {}).get("median")
        names = (cell.get("metrics_text") or {}).get("torchprof_top_cpu_ops") or []
        if hottest_ms is not None or names:
            rows.append([cell.get("cell"), total_ms, hottest_ms, ", ".join(map(str, names))])
    if not rows:
        return []
    return [ReportSection(
        "Top CPU operators",
        text="Self time of the PyTorch operators in CPU-only traces: medians over passing "
             "trials; the operators, hottest first, of each cell's first passing trial.",
        columns=["cell", "CPU op ms", "hottest op ms", "hottest operators"], rows=rows)]
