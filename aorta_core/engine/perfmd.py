"""``perf.md``: one row per cell, readable in a terminal and on GitHub."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aorta_core.engine.collector_sections import CollectorSection

#: What Markdown (and the HTML GitHub lets through it) would read as syntax in a table cell:
#: one pass with the backslash escaped too, so that data cannot undo an escape.
_MARKDOWN = {"\\": "\\\\", "|": "\\|", "`": "\\`", "[": "\\[", "]": "\\]",
             "&": "&amp;", "<": "&lt;", ">": "&gt;"}
_SPECIAL = re.compile(r"[\\|`\[\]&<>]|[\x00-\x1f\x7f\u2028\u2029]+")


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    magnitude = abs(value)
    if magnitude == 0 or 0.01 <= magnitude < 1e6:
        return f"{value:.4g}" if magnitude < 1000 else f"{value:.0f}"
    return f"{value:.3e}"


def _cell_value(stats: dict[str, Any] | None) -> str:
    if not stats:
        return ""
    text = _fmt(stats["median"])
    if stats.get("n", 0) > 1 and stats.get("std") is not None:
        text += f" ±{_fmt(stats['std'])}"
    return text


def md_text(text: Any) -> str:
    """``text`` (any data: a cell, an axis value, a metric name, an error) as literal text in
    one table cell or line: no tag, link, code span or column break, control runs as a space."""
    return _SPECIAL.sub(lambda m: _MARKDOWN.get(m[0], " "), str(text))


def md_code(text: Any) -> str:
    """``text`` as a code span when nothing in it needs escaping (inside one, escapes would
    show), else as escaped text."""
    escaped = md_text(text)
    return f"`{escaped}`" if escaped == str(text) else escaped


def render(matrix: dict[str, Any], sections: Sequence[CollectorSection] = ()) -> str:
    """Markdown table: axes, trial verdicts, wall time and every numeric metric (medians), then
    the collectors' own sections."""
    return "".join(render_lines(matrix, sections))


def render_lines(matrix: dict[str, Any], sections: Sequence[CollectorSection] = ()
                 ) -> Iterator[str]:
    """:func:`render`'s lines, each ending in a newline. Metrics are columns of the table, or,
    when the matrix keeps its summaries listed (many sparse names: a column each would make
    perf.md grow with cells x names), counted in one line that points to the full data."""
    cells = matrix["cells"]
    axes = matrix["axes"]
    listed = any(not isinstance(c["metrics_summary"], dict) for c in cells)
    metrics = [] if listed else sorted({m for c in cells for m in c["metrics_summary"]})
    header = ["cell", *axes, "pass/fail/error", "wall_time_s", *metrics]
    lines = [
        f"# aorta sweep: {md_text(matrix['output'])}",
        "",
        f"{matrix['trials']['total']} trials in {len(cells)} cells: "
        f"{matrix['trials']['pass']} pass, {matrix['trials']['fail']} fail, "
        f"{matrix['trials']['error']} error. Values are medians over passing trials "
        "(± sample std when n > 1); full statistics in matrix.json.",
        "",
        "| " + " | ".join(md_text(h) for h in header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    for cell in cells:
        t = cell["trials"]
        row = [
            cell["cell"],
            *(cell["axes"].get(a, "") for a in axes),
            f"{t['pass']}/{t['fail']}/{t['error']}" + (" (not run)" if cell.get("error") else ""),
            _cell_value(cell.get("wall_time_s")),
            *(_cell_value(cell["metrics_summary"].get(m)) for m in metrics),
        ]
        lines.append("| " + " | ".join(md_text(v) for v in row) + " |")
    yield from (line + "\n" for line in lines)
    if listed:
        count = sum(len(c["metrics_summary"]) for c in cells)
        yield (f"\nNumeric metrics: {count} statistics over {len(cells)} cells, too many names "
               "for a column each; see `metrics_summary` in matrix.json and matrix.parquet.\n")
    errors = [c for c in cells if c.get("error")]
    if errors:
        yield "\nCells that could not run:\n\n"
        yield from (f"- {md_code(c['cell'])}: {md_text(c['error'])}\n" for c in errors)
    for section in sections:
        yield from _section_lines(section)


def _section_lines(section: CollectorSection) -> Iterator[str]:
    """A collector's section: its title with the collector's name, paragraphs, a table."""
    yield f"\n## {md_text(section.title)} ({md_text(section.collector)})\n\n"
    yield from (f"{md_text(p)}\n\n" for p in section.paragraphs)
    if section.columns:
        yield "| " + " | ".join(md_text(c) for c in section.columns) + " |\n"
        yield "| " + " | ".join("---" for _ in section.columns) + " |\n"
        for row in section.rows:
            yield "| " + " | ".join(md_text(_value(v)) for v in row) + " |\n"
    if section.more_rows:
        yield f"\n{section.more_rows} more row(s) not shown.\n"


def _value(value: Any) -> str:
    return _fmt(value) if isinstance(value, int | float) else "" if value is None else value
