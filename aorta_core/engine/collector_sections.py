"""The report sections collectors contribute (``report_sections``), checked once for both
report.html and perf.md.

Only collectors that ran in the sweep are asked. A hook that raises, hangs or returns something
that is not a list of ``ReportSection`` costs its sections and one warning, never the report;
values are reduced to plain text and numbers, so a plugin cannot put markup into either file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_core.api.contracts import ReportSection
from aorta_core.engine.isolation import call_hook
from aorta_core.engine.progress import warning_line

#: Rows shown per section; the rest is counted in a note (a report is read, not searched).
MAX_ROWS = 200


@dataclass(frozen=True)
class CollectorSection:
    collector: str
    title: str
    paragraphs: list[str]
    columns: list[str]
    rows: list[list[Any]]
    #: Rows the collector gave beyond :data:`MAX_ROWS`.
    more_rows: int


def collector_sections(matrix: Mapping[str, Any], output: Path) -> list[CollectorSection]:
    """The sections of every collector that ran in ``matrix``'s cells, in collector name order."""
    from aorta_core.engine.plugins import PluginLoadError, load_registry

    try:
        registry = load_registry()
    except PluginLoadError as exc:
        warning_line(f"the collectors' report sections are left out: {exc}")
        return []
    ran = sorted({n for c in matrix.get("cells", ()) for n in c.get("collectors") or ()}
                 & set(registry.collectors))
    sections = []
    for name in ran:
        outcome = call_hook(lambda n=name: [_checked(n, s) for s in _listed(registry.call(
            n, "report_sections", matrix=matrix, output_dir=output))])
        if outcome.failure is not None:
            warning_line(f"collector {name}: report_sections failed ({outcome.failure}); its "
                         "report sections are left out")
        else:
            sections += outcome.value
    return sections


def _listed(value: object) -> Sequence[ReportSection]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"returned {type(value).__name__}, not a list of ReportSection")
    return value


def _checked(collector: str, section: object) -> CollectorSection:
    """``section`` as plain text and numbers, or ``TypeError`` saying what is wrong with it."""
    if not isinstance(section, ReportSection):
        raise TypeError(f"returned {type(section).__name__} among its sections, not ReportSection")
    columns = [_text(c) for c in section.columns]
    rows = [list(map(_value, row)) for row in section.rows]
    wrong = next((i for i, row in enumerate(rows) if len(row) != len(columns)), None)
    if wrong is not None:
        raise TypeError(f"section {_text(section.title)[:60]!r}: row {wrong} has "
                        f"{len(rows[wrong])} values for {len(columns)} columns")
    paragraphs = [line for line in map(str.strip, _text(section.text).splitlines()) if line]
    return CollectorSection(collector, _text(section.title) or collector, paragraphs, columns,
                            rows[:MAX_ROWS], max(0, len(rows) - MAX_ROWS))


def _text(value: object) -> str:
    return str.__str__(value if isinstance(value, str) else str(value))


def _value(value: object) -> Any:
    """Numbers (plain: the renderers format them) and ``None`` stay; anything else is its
    text."""
    if value is None:
        return None
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__int__(value)
    return _text(value)
