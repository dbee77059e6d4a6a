"""``perf.md``: the cells' numbers, readable in a terminal and on GitHub."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len

from aorta_core.engine.tables import Layout, orient, widths

if TYPE_CHECKING:
    from aorta_core.engine.collector_sections import CollectorSection

#: What Markdown (and the HTML GitHub lets through it) would read as syntax in a table cell:
#: one pass with the backslash escaped too, so that data cannot undo an escape.
_MARKDOWN = {"\\": "\\\\", "|": "\\|", "`": "\\`", "[": "\\[", "]": "\\]",
             "&": "&amp;", "<": "&lt;", ">": "&gt;"}
NOT_MEASURED = "not measured"
_SPECIAL = re.compile(r"[\\|`\[\]&<>]|[\x00-\x1f\x7f\u2028\u2029]+")


def _fmt(value: float | None) -> str:
    if value is None:
        return NOT_MEASURED
    magnitude = abs(value)
    if magnitude == 0 or 0.01 <= magnitude < 1e6:
        return f"{value:.4g}" if magnitude < 1000 else f"{value:.0f}"
    return f"{value:.3e}"


def _cell_value(stats: dict[str, Any] | None) -> str:
    """A metric's median (± sample std over more than one trial), or "not measured" where the
    cell has no passing trial that reported it (absent is not 0)."""
    if not stats or stats.get("median") is None:
        return NOT_MEASURED
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
    """Markdown: axes, trial verdicts, wall time and every numeric metric (medians) of each
    cell, the lists the cells' metrics hold (top kernels, operators), then the collectors' own
    sections."""
    return "".join(render_lines(matrix, sections))


def render_lines(matrix: dict[str, Any], sections: Sequence[CollectorSection] = ()
                 ) -> Iterator[str]:
    """:func:`render`'s lines, each ending in a newline. The table has cells as rows, or cells as
    columns and metrics as rows where that is narrower (:func:`~aorta_core.engine.tables.orient`,
    for :data:`WIDTH` columns). Metrics are the table's fields, or, when the matrix keeps its
    summaries listed (many sparse names: a field each would make perf.md grow with cells x names),
    counted in one line that points to the full data."""
    cells = matrix["cells"]
    axes = matrix["axes"]
    listed = any(not isinstance(c["metrics_summary"], dict) for c in cells)
    metrics = [] if listed else sorted({m for c in cells for m in c["metrics_summary"]})
    fields = [*axes, "pass/fail/error", "wall_time_s", *metrics]
    values = [[
        *(str(cell["axes"].get(a, "")) for a in axes),
        f"{t['pass']}/{t['fail']}/{t['error']}" + (" (not run)" if cell.get("error") else ""),
        _cell_value(cell.get("wall_time_s")),
        *(_cell_value(cell["metrics_summary"].get(m)) for m in metrics),
    ] for cell in cells for t in [cell["trials"]]]
    layout = _layout([c["cell"] for c in cells], fields, values)
    yield f"# aorta sweep: {md_text(matrix['output'])}\n\n"
    yield from _failure_lines(matrix)
    yield from (line + "\n" for line in (
        f"{matrix['trials']['total']} trials in {len(cells)} cells: "
        f"{matrix['trials']['pass']} pass, {matrix['trials']['fail']} fail, "
        f"{matrix['trials']['error']} error. Values are medians over passing trials "
        "(± sample std when n > 1); full statistics in matrix.json. "
        f"{NOT_MEASURED.capitalize()}: no passing trial of the cell reported it.",
        "",
    ))
    yield from _table(layout.header, layout.rows, [False] + [True] * (len(layout.header) - 1))
    if layout.shortened:
        yield f"\n{SHORTENED}\n"
    if listed:
        count = sum(len(c["metrics_summary"]) for c in cells)
        yield (f"\nNumeric metrics: {count} statistics over {len(cells)} cells, too many names "
               "for a field each; see `metrics_summary` in matrix.json and matrix.parquet.\n")
    yield from _list_lines(cells)
    from aorta_core.engine.diagnosis_section import diagnosis_section  # trials' diagnosis.json

    for section in (*diagnosis_section(matrix), *sections):
        yield from _section_lines(section)


def _failure_lines(matrix: dict[str, Any]) -> Iterator[str]:
    """What went wrong (:mod:`~aorta_core.engine.failed_cells`), before any number: the lead,
    then per reason its cells, their trials it cost and the file to read."""
    from pathlib import Path

    from aorta_core.engine.failed_cells import what_went_wrong

    found = what_went_wrong(Path(matrix["output"]), matrix)
    if found is None:
        return
    yield f"**What went wrong.** {found.lead}\n\n"
    for failure in found.failures:
        where = f"; see {md_code(failure.log)}" if failure.log else ""
        yield (f"- {failure.named_cells(md_code)}: {md_text(failure.reason)} "
               f"({failure.trials}{where})\n")
    if found.more:
        yield f"- {found.more} more reason(s): each trial's record.json has its own\n"
    if found.unread:
        yield (f"\n{found.unread} failed trial(s) not read for their reason: each trial's "
               "record.json has it.\n")
    yield "\n"


#: Columns perf.md is laid out for: a terminal's, and about what GitHub shows without scrolling.
WIDTH = 100
#: Characters of a listed name (a kernel's can be thousands) shown in perf.md.
MAX_NAME = 100
SHORTENED = ("Cell names are shortened to what tells them apart (… marks the cut); the full "
             "names are in matrix.json.")


def _layout(names: list[str], fields: list[str], values: list[list[str]], corner: str = "cell",
            field_corner: str = "metric") -> Layout:
    """:func:`orient` of the text as Markdown will show it (escaped)."""
    return orient([md_text(n) for n in names], [md_text(f) for f in fields],
                  [[md_text(v) for v in row] for row in values], WIDTH, corner=corner,
                  field_corner=field_corner)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
           ) -> Iterator[str]:
    """A Markdown table padded to line up in a terminal, the columns marked in ``right``
    (numbers) right-aligned."""
    sizes = [max(w, 3) for w in widths(header, rows)]

    def line(texts: Sequence[str]) -> str:
        padded = [" " * (w - cell_len(t)) + t if r else t + " " * (w - cell_len(t))
                  for t, w, r in zip(texts, sizes, right, strict=True)]
        return "| " + " | ".join(padded) + " |\n"

    yield line(header)
    yield "| " + " | ".join("-" * (w - 1) + ":" if r else "-" * w
                            for w, r in zip(sizes, right, strict=True)) + " |\n"
    yield from map(line, rows)


def list_metrics(cells: list[dict[str, Any]]) -> list[tuple[str, list[tuple[str, list]]]]:
    """Every list among the cells' metrics (``metrics_text``), chosen by shape, not by name:
    (metric, [(cell, its list)]) by metric name; a cell without that list is left out."""
    names = sorted({m for c in cells for m, v in (c.get("metrics_text") or {}).items()
                    if isinstance(v, list)})
    return [(m, [(c["cell"], c["metrics_text"][m]) for c in cells
                 if isinstance((c.get("metrics_text") or {}).get(m), list)]) for m in names]


def _list_lines(cells: list[dict[str, Any]]) -> Iterator[str]:
    """Every list among the cells' metrics (``<c>_top_kernels``, ``<c>_top_cpu_ops``, any
    collector's or workload's: chosen by shape, not by name), one table each, ranks against
    cells; a cell without that list is left out of its table."""
    lists = list_metrics(cells)
    if not lists:
        return
    yield ("\n## Top kernels and operators\n\nEach list the cells' metrics hold, in the order "
           "the collector or workload gave it (top lists: hottest first), from each cell's first "
           "passing trial (`metrics_text` in matrix.json).\n")
    cut = False
    for metric, having in lists:
        ranks = max(len(v) for _, v in having)
        texts = [[str(v) for v in items] + [""] * (ranks - len(items)) for _, items in having]
        cut = cut or any(len(t) > MAX_NAME for row in texts for t in row)
        values = [[t if len(t) <= MAX_NAME else t[:MAX_NAME - 1] + "…" for t in row]
                  for row in texts]
        layout = _layout([n for n, _ in having], [str(r + 1) for r in range(ranks)], values,
                         field_corner="#")
        yield f"\n### {md_code(metric)}\n\n"
        yield from _table(layout.header, layout.rows, [False] * len(layout.header))
        if layout.shortened:
            yield f"\n{SHORTENED}\n"
    if cut:
        yield (f"\nNames longer than {MAX_NAME} characters are cut (… marks the cut); "
               "matrix.json has them whole.\n")


def _section_lines(section: CollectorSection) -> Iterator[str]:
    """A collector's section: its title with the collector's name, paragraphs, a table."""
    yield f"\n## {md_text(section.title)} ({md_text(section.collector)})\n\n"
    yield from (f"{md_text(p)}\n\n" for p in section.paragraphs)
    if section.columns:
        # A column of numbers (None where one was not measured) is right-aligned.
        numbers = [all(isinstance(row[i], int | float | None) for row in section.rows)
                   and any(row[i] is not None for row in section.rows)
                   for i in range(len(section.columns))]
        yield from _table([md_text(c) for c in section.columns],
                          [[md_text(_value(v, n)) for v, n in zip(row, numbers, strict=True)]
                           for row in section.rows], numbers)
    if section.more_rows:
        yield f"\n{section.more_rows} more row(s) not shown.\n"


def _value(value: Any, number: bool) -> str:
    """A section's value: a number formatted, ``None`` in a column of numbers as not measured
    (elsewhere as nothing), text as it is."""
    if value is None:
        return NOT_MEASURED if number else ""
    return _fmt(value) if isinstance(value, int | float) else value
