"""The "Agreement" section of a ``sweep=agree`` report.html, drawn from ``agreement.json``
(:mod:`aorta_core.reports.agreement`): one table per metric with coloured verdicts, the GPU time
of every trial against the consensus, the wall-time overhead, the matched top kernels; and its
plain form for perf.md (:func:`agreement_text_section`): every verdict and reason."""

from __future__ import annotations

import html
from typing import Any

from aorta_core.engine.collector_sections import CollectorSection
from aorta_core.reports.figures import Figure, figure
from aorta_core.reports.html import Markup, Page

_CSS = {"agree": "good", "disagree": "bad"}
_ABOUT = {
    "gpu_time_ms": "the sum of kernel durations of each collector; reference: the payload's own "
                   "timing in the bare cell",
    "kernel_count": "kernels launched, as each collector counts them",
    "top_kernel_ms": "the hottest kernel's time; compared between the collectors that name the "
                     "same hottest kernel",
}
_ABOUT_REFERENCE = "the payload's own timing in each cell: how much each profiler changes it"
_NAME_LIMIT = 100


def _verdict(entry: dict[str, Any]) -> Markup:
    css = _CSS.get(entry.get("status") or "", "note")
    return Markup(f"<span class={css}>{html.escape(str(entry.get('verdict') or '—'))}</span>")


def _metric(page: Page, metric: str, entry: dict[str, Any]) -> None:
    unit = entry.get("unit")
    page.heading(f"{metric} ({unit})" if unit else metric, 3)
    about = _ABOUT.get(metric, _ABOUT_REFERENCE)
    page.paragraph(Markup(f"{html.escape(about)}. Consensus "
                          f"{html.escape(_num(entry.get('consensus')))}: {_verdict(entry)}"))
    page.table(["source", "metric", "cell", "median", "min", "max", "MAD", "n",
                "vs consensus %", "verdict"],
               [[name, s["metric"], s["cell"], s["median"], s["min"], s["max"], s["mad"],
                 s["n"], s["deviation_pct"], _verdict(s)]
                for name, s in entry["sources"].items()])
    reason = entry.get("reference_reason")
    if reason:
        page.paragraph(f"Why the reference disagrees with every profiler: {reason['text']}. "
                       f"Formula: {reason['formula']}.")


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:.4g}"


def _trials_figure(metric: str, entry: dict[str, Any], tolerance: float) -> Figure | None:
    """Each comparable source's value per round, the consensus and ± half the tolerance."""
    shown = {n: s for n, s in entry["sources"].items() if s["n"] and s["comparable"]}
    consensus = entry.get("consensus")
    if not shown or consensus is None:
        return None
    half = abs(consensus) * tolerance / 200.0
    data = [{"type": "scatter", "mode": "lines+markers", "name": name, "x": s["trials"],
             "y": s["values"]} for name, s in shown.items()]
    band = {"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": consensus - half,
            "y1": consensus + half, "fillcolor": "rgba(39,174,96,0.12)", "line": {"width": 0},
            "layer": "below"}
    line = {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": consensus,
            "y1": consensus, "line": {"dash": "dash", "color": "#27ae60"}}
    return figure(data, f"{metric} per trial (shaded: consensus ± half the {tolerance:g} % "
                  "tolerance)", "trial (round)", entry.get("unit") or metric,
                  shapes=[band, line], yaxis={"title": {"text": entry.get("unit") or metric}})


def _overhead(page: Page, overhead: dict[str, dict[str, Any]]) -> None:
    page.heading("Wall-time overhead over the bare cell", 3)
    page.table(["collector", "n", "median s", "bare median s", "ratio", "overhead %", "p",
                "significant", "verdict"],
               [[name, o["n"], o["median_s"], o["bare_median_s"], o["ratio"],
                 o["overhead_pct"], o["p_value"], o["significant"], o["verdict"]]
                for name, o in overhead.items()])


def _kernel_cell(kernel: dict[str, Any]) -> Markup:
    name = kernel["name"]
    short = name if len(name) <= _NAME_LIMIT else name[: _NAME_LIMIT - 1] + "…"
    return Markup(f"<span title='{html.escape(kernel['key'], quote=True)}'>"
                  f"{html.escape(short)}</span>")


def _top_kernels(page: Page, top: dict[str, Any]) -> None:
    sources = top.get("sources") or []
    if not sources:
        return
    page.heading("Top kernels matched across collectors (rank in each collector's top list)", 3)
    page.table(["kernel", *sources, "listed by"],
               [[_kernel_cell(k), *(k["ranks"].get(s, "—") for s in sources), len(k["ranks"])]
                for k in top["kernels"]])
    lines = [f"{p['a']} and {p['b']}: {p['shared']} of {p['union']} kernels shared "
             f"(Jaccard {p['jaccard']:.2f})" for p in top["pairs"]]
    if top.get("in_all") is not None:
        lines.append(f"listed by every collector: {top['in_all']}; the hottest kernel is "
                     f"{'the same' if top.get('hottest_agrees') else 'not the same'} for all")
    page.bullets(lines)


def agreement_section(page: Page, agreement: dict[str, Any]) -> None:
    """Append the section; ``agreement`` is the content of ``agreement.json``."""
    tolerance = float(agreement["tolerance_pct"])
    reference = agreement.get("reference") or {}
    page.heading("Agreement (sweep=agree)")
    page.paragraph(
        f"Medians of the passing trials; a metric agrees when its sources' medians are within "
        f"{tolerance:g} % of each other. Reference (the payload's own timing): "
        f"{reference.get('metric') or 'none'}"
        f"{'' if reference.get('found') else ' (not written by the payload)'}. Overhead test: "
        f"{agreement.get('test')}, alpha {agreement.get('alpha')}. Every number is in "
        "agreement.json.", "note")
    page.table(["collector", "cell", "pass", "trials", "rounds", "times comparable",
                "left out / error"],
               [[name, c["cell"], c["trials"]["pass"], c["trials"]["total"], c.get("rounds"),
                 c["times_comparable"], c.get("skipped") or c.get("error") or ""]
                for name, c in agreement["collectors"].items()])
    for metric, entry in agreement["metrics"].items():
        _metric(page, metric, entry)
        trials = _trials_figure(metric, entry, tolerance) if metric == "gpu_time_ms" else None
        if trials is not None:
            page.figure("agreement_gpu_time", trials)
    _overhead(page, agreement["overhead"])
    _top_kernels(page, agreement.get("top_kernels") or {})


def agreement_text_section(agreement: dict[str, Any]) -> CollectorSection:
    """The verdicts of ``agreement.json`` as perf.md shows a section: per metric its overall
    verdict and each source's, then each collector's wall-time overhead; a reference's
    disagreement reason as a paragraph."""
    rows: list[list[Any]] = []
    reasons = []
    for metric, entry in agreement["metrics"].items():
        rows.append([metric, "(all)", entry.get("consensus"), "", entry.get("verdict")])
        rows += [[metric, name, src["median"], src["deviation_pct"], src.get("verdict")]
                 for name, src in entry["sources"].items()]
        if entry.get("reference_reason"):
            reason = entry["reference_reason"]
            reasons.append(f"Why the reference disagrees on {metric}: {reason['text']}. "
                           f"Formula: {reason['formula']}.")
    rows += [["wall-time overhead", name, o["median_s"], o["overhead_pct"], o["verdict"]]
             for name, o in agreement["overhead"].items()]
    about = (f"agreement.json: a metric agrees when its sources' medians are within "
             f"{float(agreement['tolerance_pct']):g} % of each other; (all) is the consensus and "
             "the metric's verdict, % the source's deviation from it (overhead: over the bare "
             "cell's wall time).")
    return CollectorSection(collector="sweep=agree", title="Agreement",
                            paragraphs=[about, *reasons],
                            columns=["metric", "source", "median", "%", "verdict"], rows=rows,
                            more_rows=0)
