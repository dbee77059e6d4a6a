"""The kernel rows (:mod:`.kernel_changes`) as markdown lines and as an HTML section: per cell
pair and collector, what got slower and what got faster, sorted by ms, and how much of the
measured step (or wall) difference the significant rows explain. Shared by ``aorta compare``
and report.html's headline."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from aorta_core.engine.perfmd import md_code, md_text
from aorta_core.reports.html import Markup, Page
from aorta_core.reports.kernel_changes import KernelChange, KernelSummary
from aorta_core.reports.significance import interval_text

#: Rows listed per direction, per cell pair and collector (``--json`` holds them all).
SHOWN = 15
#: Characters of a kernel name shown (C++ names run to thousands); whole on hover in HTML.
NAME_WIDTH = 100


def _cut(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def explanation(summary: KernelSummary) -> str:
    """One sentence: the rows tested and found, what they explain, and whether the pair had
    the trials to find a lone change."""
    found = (f"{summary.rows} kernel row(s), {summary.tested} tested: {summary.slower} "
             f"significantly slower, {summary.faster} faster")
    if summary.trials < summary.trials_needed:
        found += (f" (among this many rows one change alone is significant only from "
                  f"{summary.trials_needed} trials a side; this pair had {summary.trials})")
    if summary.reference_delta_ms is None:
        return (f"{found}; the significant rows sum to {summary.significant_delta_ms:+.4g} "
                f"{summary.unit} ({summary.reference} was not measured in both cells, nothing "
                "to explain)")
    low, high = summary.reference_ci_low_ms, summary.reference_ci_high_ms
    measured = interval_text(summary.reference_delta_ms, low, high)
    if summary.explained is None or not summary.significant_delta_ms:
        share = ""  # a step difference of 0, or no significant row: no share to give
    elif low is None or high is None:  # too few trials to test the reference
        share = f" ({summary.explained * 100:.0f} % of it)"
    elif low <= 0 <= high:
        share = (" (its interval holds 0: the step moved less than its own noise, so the "
                 "share they explain is not measured)")
    else:
        ends = sorted(summary.significant_delta_ms / end * 100 for end in (low, high))
        share = (f" ({summary.explained * 100:.0f} % of it; {ends[0]:.0f}–{ends[1]:.0f} % "
                 "across its interval)")
    if not (summary.slower or summary.faster):  # nothing to set against the step difference
        return (f"{found}; the measured difference in {summary.reference} is {measured} ms; "
                f"all rows sum to {summary.all_delta_ms:+.4g}")
    return (f"{found}; the significant rows sum to {summary.significant_delta_ms:+.4g} "
            f"{summary.unit} of the measured {measured} ms difference in "
            f"{summary.reference}{share}; all rows sum to {summary.all_delta_ms:+.4g}")


def _groups(rows: Sequence[KernelChange], summaries: Sequence[KernelSummary]
            ) -> Iterable[tuple[KernelSummary, list[KernelChange], list[KernelChange]]]:
    """(summary, slower rows by ms, faster rows by ms) per cell pair and collector."""
    for s in summaries:
        part = [r for r in rows if r.cell == s.cell and r.collector == s.collector
                and r.significant and r.delta_ms]
        yield (s, sorted((r for r in part if r.delta_ms > 0), key=lambda r: -r.delta_ms),
               sorted((r for r in part if r.delta_ms < 0), key=lambda r: r.delta_ms))


def lead(alpha: float, floor: bool, min_trials: int) -> str:
    return (f"Per kernel: the median over trials of its ms per profiled step (per capture where "
            f"the collector saw no steps); Δ is candidate − baseline with its 95 % bootstrap "
            f"interval; significant: Mann–Whitney U, Benjamini–Hochberg q over the cell pair's "
            f"kernels ≤ {alpha:g}{' and beyond the noise floor' if floor else ''}, with ≥ "
            f"{min_trials} trials a side.")


def markdown_lines(rows: Sequence[KernelChange], summaries: Sequence[KernelSummary],
                   alpha: float, floor: bool, min_trials: int) -> list[str]:
    lines = ["## Kernels", "", lead(alpha, floor, min_trials), ""]
    for s, slower, faster in _groups(rows, summaries):
        lines += [f"### {md_code(s.cell)} · {md_text(s.collector)} ({s.unit})", "",
                  md_text(explanation(s)) + ".", ""]
        for word, part in (("slower", slower), ("faster", faster)):
            if not part:
                continue
            lines += [f"| {word} | kind | baseline | candidate | Δ [95 % CI] | q |",
                      "|---|---|---:|---:|---:|---:|"]
            lines += [f"| {md_code(_cut(r.name))} | {r.kind} | {_num(r.baseline_ms)} | "
                      f"{_num(r.candidate_ms)} | "
                      f"{interval_text(r.delta_ms, r.ci_low_ms, r.ci_high_ms)} | {_num(r.q)} |"
                      for r in part[:SHOWN]]
            if len(part) > SHOWN:
                lines.append(f"| … {len(part) - SHOWN} more (--json lists them all) "
                             "| | | | | |")
            lines.append("")
        held = held_back(rows, s, alpha) if floor else ""
        lines += [md_text(held), ""] if held else []
    return lines


def held_back(rows: Sequence[KernelChange], summary: KernelSummary, alpha: float) -> str:
    """The pair's rows the test found (q ≤ alpha) that their noise floor held back, by ms, as a
    sentence; ``""`` when there is none."""
    held = sorted((r for r in rows if r.cell == summary.cell and r.collector == summary.collector
                   and not r.significant and r.q is not None and r.q <= alpha
                   and r.noise_floor is not None and r.delta_ms and r.baseline_ms),
                  key=lambda r: -abs(r.delta_ms))
    if not held:
        return ""
    return f"Within their noise floor (q ≤ {alpha:g}, Δ not beyond it): " + ", ".join(
        f"{_cut(r.name)} {r.delta_ms:+.4g} ({r.delta_ms / r.baseline_ms * 100:+.1f} %, floor "
        f"{r.noise_floor * 100:.1f} %)" for r in held[:SHOWN]) + "."


def _name_html(name: str) -> Markup:
    return Markup(f"<span title='{html.escape(name, quote=True)}'>{html.escape(_cut(name))}"
                  "</span>")


def html_section(page: Page, rows: Sequence[KernelChange], summaries: Sequence[KernelSummary],
                 alpha: float, floor: bool, min_trials: int, level: int = 2) -> None:
    page.heading("Kernels", level)
    page.paragraph(lead(alpha, floor, min_trials), "note")
    for s, slower, faster in _groups(rows, summaries):
        page.heading(f"{s.cell} · {s.collector} ({s.unit})", level + 1)
        page.paragraph(explanation(s) + ".")
        for word, part in (("slower", slower), ("faster", faster)):
            if part:
                page.table([word, "kind", "baseline", "candidate", "Δ", "CI low", "CI high",
                            "q"],
                           [[_name_html(r.name), r.kind, r.baseline_ms, r.candidate_ms,
                             r.delta_ms, r.ci_low_ms, r.ci_high_ms, r.q]
                            for r in part[:SHOWN]], sortable=True)
                if len(part) > SHOWN:
                    page.paragraph(f"… {len(part) - SHOWN} more {word} rows (aorta compare "
                                   "--json lists them all).", "note")
        held = held_back(rows, s, alpha) if floor else ""
        if held:
            page.paragraph(held, "note")
