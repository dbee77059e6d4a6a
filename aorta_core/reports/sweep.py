"""The sweep's ``report.html``: what went wrong (when anything did), the headline (the answer
first), agreement (``sweep=agree``), the sortable cell table, metrics by group, trial spread by
the sweep's axes, top kernels and operators, GPU time per collector, trial links.

Written after every sweep (the core's end-of-sweep callback calls :func:`write_sweep_report`) and
by ``aorta report sweep <output>``. It reads what the matrix step wrote (``matrix.json``,
``matrix.parquet``) and the trial records; a section whose input is missing or odd becomes a
note on the page, so the function never raises.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.oneline import exception_line
from aorta_core.engine.collector_sections import collector_sections
from aorta_core.engine.diagnosis_section import diagnosis_section
from aorta_core.engine.failed_cells import what_went_wrong
from aorta_core.engine.progress import warning_line
from aorta_core.engine.records import RECORD_NAME, BadRecord, decode_json, load_record, read_json
from aorta_core.reports.agreement import AGREEMENT_NAME
from aorta_core.reports.agreement_section import agreement_section
from aorta_core.reports.cell_tables import cells_section, kinds, metrics_section
from aorta_core.reports.figures import figure, pngs_asked, pngs_wanted
from aorta_core.reports.headline import headline_section
from aorta_core.reports.html import Markup, Page, inside, link
from aorta_core.reports.lists_section import lists_section
from aorta_core.reports.matrix_files import load_matrix
from aorta_core.reports.spread import spread_section
from aorta_core.reports.timeline import TIMELINE_NAME

REPORT_NAME = "report.html"
PNG_FOLDER = "report_png"
MAX_TRIAL_ROWS = 2000


def _header(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    trials = matrix.get("trials") or {}
    page.paragraph(f"output {output} — created {matrix.get('created_at', '?')} — trials: "
                   + ", ".join(f"{k} {v}" for k, v in trials.items()), "note")
    unreadable = matrix.get("unreadable_records") or []
    if unreadable:
        page.paragraph(f"{len(unreadable)} unreadable record(s) left out: "
                       f"{', '.join(map(str, unreadable[:10]))}; re-run the sweep to redo them",
                       "bad")


def _failures(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    """What went wrong, before any comparison: the lead, then per reason its cells, their
    trials it cost and a link to the file to read (:mod:`~aorta_core.engine.failed_cells`)."""
    found = what_went_wrong(output, matrix)
    if found is None:
        return
    page.begin("failures")
    page.heading("What went wrong")
    page.paragraph(found.lead, "bad")
    page.table(["cells", "trials", "why", "read next"], [
        [f.named_cells(str), f.trials, f.reason, link(f.log, f.log) if f.log else ""]
        for f in found.failures])
    if found.more:
        page.paragraph(f"{found.more} more reason(s): each trial's record.json has its own "
                       "(the Trials table below links them).", "note")
    if found.unread:
        page.paragraph(f"{found.unread} failed trial(s) not read for their reason: each trial's "
                       "record.json has it (the Trials table below links them).", "note")
    page.end()


def _collectors(matrix: dict[str, Any]) -> list[str]:
    names = set()
    for c in matrix["cells"]:
        for key in (*(c.get("metrics_summary") or {}), *(c.get("metrics_text") or {})):
            for suffix in ("_top_kernels", "_top_kernel_ms", "_gpu_time_ms"):
                if key.endswith(suffix) and not key.startswith("workload_"):
                    names.add(key[: -len(suffix)])
    return sorted(names)


def _kernels(page: Page, matrix: dict[str, Any]) -> None:
    """Per collector: GPU time, hottest kernel and kernel count per cell, and a bar of the
    hottest kernel against the rest (the names are in "Top kernels and operators")."""
    collectors = _collectors(matrix)
    if not collectors:
        return
    page.heading("GPU time per collector (median of passing trials)")
    for name in collectors:
        rows, cells, top, rest, hottest = [], [], [], [], []
        for c in matrix["cells"]:
            summary, text = c.get("metrics_summary") or {}, c.get("metrics_text") or {}
            gpu = (summary.get(f"{name}_gpu_time_ms") or {}).get("median")
            hot = (summary.get(f"{name}_top_kernel_ms") or {}).get("median")
            count = (summary.get(f"{name}_kernel_count") or {}).get("median")
            kernels = _names(text.get(f"{name}_top_kernels"))
            if gpu is None and hot is None and not kernels:
                continue
            rows.append([c["cell"], gpu, hot, count, kernels[0] if kernels else "—"])
            cells.append(c["cell"])
            top.append(hot)
            rest.append(gpu - hot if gpu is not None and hot is not None else None)
            hottest.append(kernels[0] if kernels else "")
        page.heading(name, 3)
        page.table(["cell", "GPU time (ms)", "hottest kernel (ms)", "kernel count",
                    "hottest kernel"], rows, sortable=True)
        if any(v is not None for v in top):
            page.figure(f"kernels_{name}", figure(
                [{"type": "bar", "name": "top kernel", "x": cells, "y": top,
                  "hovertext": hottest},
                 {"type": "bar", "name": "other kernels", "x": cells, "y": rest}],
                f"{name}: GPU time, top kernel vs the rest", "cell", "ms", barmode="stack"))


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = decode_json(value)
        except msgspec.DecodeError:
            return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _trials(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    page.heading("Trials")
    rows = []
    for c in matrix["cells"]:
        cell_dir = str(c.get("dir") or f"cells/{c['cell']}")
        if not inside(cell_dir):  # an edited matrix.json: list nothing from outside the output
            continue
        try:
            trial_dirs = sorted(p for p in (output / cell_dir).iterdir()
                                if p.name.startswith("trial_") and p.is_dir())
        except OSError:
            continue
        for trial_dir in trial_dirs:
            if len(rows) >= MAX_TRIAL_ROWS:
                break
            try:
                record = load_record(trial_dir / RECORD_NAME, c["cell"])
            except (FileNotFoundError, BadRecord):
                continue
            base = f"{cell_dir}/{trial_dir.name}"
            files = [link(RECORD_NAME, f"{base}/{RECORD_NAME}")]
            for log in (record.stdout, record.stderr):
                if log and (trial_dir / log).exists():
                    files.append(link(log, f"{base}/{log}"))
            for name in record.collectors:
                if (trial_dir / name).is_dir():
                    files.append(link(f"{name}/", f"{base}/{name}/"))
            if (trial_dir / TIMELINE_NAME).is_file():
                files.append(link(TIMELINE_NAME, f"{base}/{TIMELINE_NAME}"))
            css = {"pass": "good"}.get(record.verdict, "bad")
            rows.append([c["cell"], record.trial,
                         Markup(f"<span class={css}>{html.escape(record.verdict)}</span>"),
                         record.exit_code, record.wall_time_s, record.error or "",
                         Markup(" ".join(files))])
    page.table(["cell", "trial", "verdict", "exit", "wall s", "error", "files"], rows)
    if len(rows) >= MAX_TRIAL_ROWS:
        page.paragraph(f"only the first {MAX_TRIAL_ROWS} trials are listed", "note")


def _environments(page: Page, matrix: dict[str, Any]) -> None:
    envs = [e for e in matrix.get("environments") or [] if isinstance(e, dict)]
    if not envs:
        return
    page.heading("Environments")
    rows = []
    for env in envs:
        gpus = ", ".join(f"{g.get('name')} (driver {g.get('driver')})"
                         for g in env.get("gpus") or [] if isinstance(g, dict)) or "none"
        packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
        collectors = ", ".join(f"{k} {v}" for k, v in (env.get("collectors") or {}).items())
        rows.append([env.get("host"), gpus, env.get("python"), packages, collectors])
    page.table(["host", "GPUs", "python", "packages", "collectors"], rows)


def _agreement(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    """Only for a ``sweep=agree``: its cells carry ``agree`` (an old agreement.json left in a
    folder now holding another sweep is not shown)."""
    if any(c.get("agree") for c in matrix["cells"]) and (output / AGREEMENT_NAME).is_file():
        agreement_section(page, read_json(output / AGREEMENT_NAME))


def _contributed(page: Page, output: Path, matrix: dict[str, Any]) -> None:
    """The trials' diagnosis (``diagnosis.json``) and the sections collectors add
    (``report_sections``), each under its source's name, as perf.md shows them."""
    for section in (*diagnosis_section(matrix), *collector_sections(matrix, output)):
        page.heading(f"{section.title} ({section.collector})")
        for paragraph in section.paragraphs:
            page.paragraph(paragraph)
        if section.columns:
            page.table(section.columns, section.rows)
        if section.more_rows:
            page.paragraph(f"{section.more_rows} more row(s) not shown.", "note")


_SECTIONS = (("what went wrong", _failures), ("headline", headline_section),
             ("agreement", _agreement), ("cells", cells_section), ("metrics", metrics_section),
             ("trial spread", spread_section), ("top kernels and operators", lists_section),
             ("GPU time", _kernels), ("collectors' own", _contributed), ("trials", _trials),
             ("environments", _environments))
#: The sections that read files in the output, and those that need the metrics' kinds.
_READ_OUTPUT = (_failures, headline_section, _agreement, spread_section, _trials, _contributed)
_KINDS = (metrics_section, spread_section)


def _build_page(output: Path, matrix: dict[str, Any] | None) -> Page:
    page = Page(f"aorta sweep report — {output.name}")
    try:
        matrix = matrix or load_matrix(output)  # bounded, checked: a FIFO or [] is a note
    except Exception as exc:
        page.paragraph(f"No usable matrix.json in {output} ("
                       f"{exception_line(exc, 200)}); run `aorta matrix {output}` then "
                       f"`aorta report sweep {output}`.", "bad")
        return page
    _header(page, output, matrix)
    try:
        found = kinds(matrix)
    except Exception as exc:
        found = None
        page.paragraph(f"The metrics could not be sorted ({exception_line(exc, 200)}).", "bad")
    for title, section in _SECTIONS:
        try:
            args = (page, output, matrix) if section in _READ_OUTPUT else (page, matrix)
            if section in _KINDS:
                if found is None:
                    continue
                args = (*args, found)
            section(*args)
        except Exception as exc:
            page.paragraph(f"The {title} section could not be built ("
                           f"{exception_line(exc, 200)}).", "bad")
    return page


def write_sweep_report(output: Path, pngs: bool | None = None,
                       matrix: dict[str, Any] | None = None) -> Path | None:
    """Write ``<output>/report.html`` (and PNGs into ``<output>/report_png/``); never raises.

    ``pngs=None`` follows ``AORTA_REPORT_PNG`` (default on); ``matrix``: its ``matrix.json``
    when the caller has read it already (:func:`~aorta_core.reports.matrix_files.load_matrix`).
    Returns the page, or ``None`` when it could not be written; problems are printed as one
    warning line each.
    """
    output = Path(output)
    path = output / REPORT_NAME
    if not output.is_dir():
        warning_line(f"no report written: {output} is not a folder; pass a sweep's output=<dir>")
        return None
    try:
        page = _build_page(output, matrix)
        line = page.write(path, output / PNG_FOLDER if pngs_wanted(pngs) else None,
                          asked=pngs_asked(pngs))
        if line and line.startswith("PNGs skipped"):
            warning_line(line)
    except Exception as exc:  # the sweep's results are safe; the page is a convenience
        warning_line(f"could not write {path} ({exception_line(exc)}); "
                     f"run aorta report sweep {output} after fixing the cause")
        return None
    return path

