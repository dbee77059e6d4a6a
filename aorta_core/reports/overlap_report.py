"""Overlap report over the benchmark's ``rank_*_metrics.jsonl`` (ours and upstream aorta's).

Both trainers write the same ``profile.overlap`` object, so one reader serves both. On upstream
input the numbers equal upstream's ``analysis/overlap_report.py``: missing keys inside
``profile.overlap`` count as 0, everything is pooled per label, and ``overlap_ratio`` =
mean compute–comm overlap / mean compute time. Better than upstream: a line without
``profile.overlap`` (CPU run, telemetry off) or a malformed line is skipped from the overlap means
with a note instead of crashing the report, and per-rank numbers come too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.files import read_limited
from aorta_core.api.parallel import decoded_bytes, parallel_map
from aorta_core.engine.records import write_json_atomic
from aorta_core.reports.figures import figure, pngs_asked, pngs_wanted
from aorta_core.reports.html import Page

GLOB = "rank_*_metrics.jsonl"
#: Upstream's summary keys, in its order, then ours.
MEANS = {
    "mean_overlap_ms": "overlap_ms",
    "mean_compute_ms": "compute_ms",
    "mean_allreduce_overlap_ms": "allreduce_overlap_ms",
    "mean_reducescatter_overlap_ms": "reducescatter_overlap_ms",
}
BUSY = {
    "mean_allreduce_busy_ms": "allreduce_busy_ms",
    "mean_reducescatter_busy_ms": "reducescatter_busy_ms",
    "mean_idle_ms": "idle_ms",
}
#: What only iterations with ``profile.overlap`` measure: null in JSON, "not measured" in
#: tables, absent from figures when no iteration of a label or rank had it.
OVERLAP_KEYS = (*MEANS, "overlap_ratio", *BUSY)
NOT_MEASURED = "not measured"
_COLUMNS = ("label", "rank", "epoch", "step", "global_step", "loss", "has_overlap",
            *MEANS.values(), *BUSY.values())


@dataclass
class Dataset:
    label: str
    folders: list[Path]
    rows: list[dict[str, Any]] = field(default_factory=list)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _row(payload: dict[str, Any]) -> dict[str, Any]:
    """One iteration; the overlap fields are read like upstream (missing key -> 0)."""
    overlap = _dict(payload.get("profile")).get("overlap")
    has = isinstance(overlap, dict)
    per_stream, pairs = _dict(_dict(overlap).get("per_stream_ms")), _dict(_dict(overlap).get(
        "overlap_ms"))

    def ms(source: dict[str, Any], key: str) -> float | None:
        return (_number(source.get(key, 0.0)) or 0.0) if has else None

    step = payload.get("global_step")
    return {
        "epoch": payload.get("epoch") if isinstance(payload.get("epoch"), int) else None,
        "step": payload.get("step") if isinstance(payload.get("step"), int) else None,
        "global_step": step if isinstance(step, int) and not isinstance(step, bool) else None,
        "loss": _number(payload.get("loss")),
        "has_overlap": has,
        "overlap_ms": ms(pairs, "compute_comm"),
        "compute_ms": ms(per_stream, "compute"),
        "allreduce_overlap_ms": ms(pairs, "compute_allreduce"),
        "reducescatter_overlap_ms": ms(pairs, "compute_reducescatter"),
        "allreduce_busy_ms": ms(per_stream, "allreduce"),
        "reducescatter_busy_ms": ms(per_stream, "reducescatter"),
        "idle_ms": ms(pairs, "idle"),
    }


def _rank(path: Path, payload: dict[str, Any]) -> int | None:
    """Upstream takes the rank from the file name (``rank_<r>_metrics``); else the record's."""
    parts = path.stem.split("_")
    if len(parts) > 1 and parts[1].isdigit():
        return int(parts[1])
    rank = payload.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def load(datasets: list[Dataset], notes: list[str]) -> None:
    """Read every rank file of the datasets' folders, in parallel worker processes
    (:func:`~aorta_core.api.parallel.parallel_map`); problems become notes, never errors."""
    files: list[tuple[Dataset, Path]] = []
    for dataset in datasets:
        for folder in dataset.folders:
            if not folder.is_dir():
                notes.append(f"{dataset.label}: {folder} is not a folder; pass the benchmark's "
                             "output_dir (the folder holding rank_*_metrics.jsonl)")
                continue
            found = sorted(folder.glob(GLOB))
            if not found:
                notes.append(f"{dataset.label}: no {GLOB} in {folder}; pass the benchmark's "
                             "output_dir")
            files += [(dataset, path) for path in found]
    paths = [path for _, path in files]
    for (dataset, path), done in zip(files, parallel_map(_read_file, paths, need=_need),
                                     strict=True):
        if done.error is not None:
            notes.append(f"{dataset.label}: cannot read {path} ({done.error}); skipped")
            continue
        rows, bad, without = done.value
        dataset.rows += [{"label": dataset.label, **row} for row in rows]
        if bad:
            notes.append(f"{dataset.label}: {path}: {len(bad)} malformed line(s) skipped "
                         f"(first: line {bad[0]})")
        if without:
            notes.append(f"{dataset.label}: {path}: {without} iteration(s) without "
                         "profile.overlap (CPU run or telemetry off) left out of the overlap "
                         "means")


def _need(path: Path) -> int:
    """Lines and their decoded objects, a few times the file."""
    try:
        return 4 * decoded_bytes(path)
    except OSError:
        return 0


def _read_file(path: Path) -> tuple[list[dict[str, Any]], list[int], int]:
    """One rank file (in a worker): its rows, its malformed line numbers, and how many
    iterations had no ``profile.overlap``."""
    rows: list[dict[str, Any]] = []
    bad: list[int] = []
    without = 0
    for number, line in enumerate(read_limited(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            payload = msgspec.json.decode(line)
        except msgspec.DecodeError:
            bad.append(number)
            continue
        if not isinstance(payload, dict):
            bad.append(number)
            continue
        row = _row(payload)
        without += not row["has_overlap"]
        rows.append({"rank": _rank(path, payload), **row})
    return rows, bad, without


def frame(rows: list[dict[str, Any]]):
    import polars as pl

    schema = {c: pl.Float64 for c in (*MEANS.values(), *BUSY.values(), "loss")}
    schema |= {"label": pl.String, "rank": pl.Int64, "epoch": pl.Int64, "step": pl.Int64,
               "global_step": pl.Int64, "has_overlap": pl.Boolean}
    return pl.DataFrame(rows, schema={c: schema[c] for c in _COLUMNS})


def aggregate(df) -> dict[str, Any]:
    """Upstream's aggregate (same keys, same numbers) plus the overlap iteration count and the
    per-stream busy and idle means."""
    import polars as pl

    if df.height == 0:
        return {"count": 0}
    out: dict[str, Any] = {"count": df.height, "mean_loss": df["loss"].mean()}
    measured = df.filter(pl.col("has_overlap"))
    # Not measured is null, never 0: a CPU run's overlap was not zero, it was not looked at.
    out |= dict.fromkeys(OVERLAP_KEYS)
    if measured.height:
        out |= {key: measured[col].mean() for key, col in MEANS.items()}
        compute = out["mean_compute_ms"]
        out["overlap_ratio"] = out["mean_overlap_ms"] / compute if compute > 0 else 0.0
        out |= {key: measured[col].mean() for key, col in BUSY.items()}
    out["overlap_iterations"] = measured.height
    return out


def compare(reference: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """Upstream's comparison block plus candidate/reference per metric (null when ref is 0).
    A side that did not measure the overlap gives null, never upstream's 0 (which it would
    have crashed on anyway), and so does a delta or ratio with a null on either side."""
    ref_ratio = reference.get("overlap_ratio")
    cand_ratio = candidate.get("overlap_ratio")
    keys = ("mean_loss", *OVERLAP_KEYS)
    ratios = {}
    for key in keys:
        ref, cand = reference.get(key), candidate.get(key)
        ratios[key] = cand / ref if ref and cand is not None else None
    delta = None if ref_ratio is None or cand_ratio is None else cand_ratio - ref_ratio
    return {"reference_overlap_ratio": ref_ratio, "candidate_overlap_ratio": cand_ratio,
            "ratio_delta": delta, "metric_ratios": ratios}


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label) or "label"


def _figures(df, labels: list[str]) -> dict[str, dict]:
    import polars as pl

    measured = df.filter(pl.col("has_overlap"))
    figs: dict[str, dict] = {}
    for label in labels:
        steps = (measured.filter((pl.col("label") == label) & pl.col("global_step").is_not_null())
                 .group_by("global_step").agg(pl.col("compute_ms", "overlap_ms").mean())
                 .sort("global_step"))
        if steps.height == 0:
            continue
        x = steps["global_step"].to_list()
        figs[f"{_safe(label)}_timeline"] = figure(
            [{"type": "scatter", "mode": "lines+markers", "name": f"{label} compute-comm overlap",
              "x": x, "y": steps["overlap_ms"].to_list()},
             {"type": "scatter", "mode": "lines+markers", "name": f"{label} compute duration",
              "x": x, "y": steps["compute_ms"].to_list()}],
            f"Overlap vs Compute Timeline ({label}; mean over ranks)", "global step", "ms")
    if measured.height == 0:
        return figs
    parts = {"compute": "compute_ms", "all-reduce": "allreduce_busy_ms",
             "reduce-scatter": "reducescatter_busy_ms", "compute–comm overlap": "overlap_ms",
             "idle": "idle_ms"}
    means = measured.group_by("label", maintain_order=True).agg(
        pl.col(list(parts.values())).mean())
    figs["overlap_breakdown"] = figure(
        [{"type": "bar", "name": row["label"], "x": list(parts),
          "y": [row[c] for c in parts.values()]} for row in means.iter_rows(named=True)],
        "Overlap breakdown (mean ms per iteration)", "", "ms", barmode="group")
    ratios = measured.filter(pl.col("compute_ms") > 0).with_columns(
        ratio=pl.col("overlap_ms") / pl.col("compute_ms"))
    figs["overlap_ratio"] = figure(
        [{"type": "box", "name": label, "boxpoints": "all", "jitter": 0.3,
          "x": [f"rank {r}" for r in sub["rank"].to_list()], "y": sub["ratio"].to_list()}
         for label in labels if (sub := ratios.filter(pl.col("label") == label)).height],
        "Overlap ratio per iteration (compute–comm overlap / compute)", "rank", "overlap ratio",
        boxmode="group")
    return figs


def _shown(agg: dict[str, Any], key: str) -> Any:
    """A table's value: "not measured" where the summary holds null or nothing."""
    value = agg.get(key)
    return NOT_MEASURED if value is None else value


def _summary_rows(named: dict[str, dict[str, Any]]) -> list[list[Any]]:
    keys = ("count", "overlap_iterations", "mean_loss", *MEANS, "overlap_ratio")
    return [[name, *(_shown(agg, k) for k in keys)] for name, agg in named.items()]


def _ratio_shown(key: str, ratio: float | None, reference: dict[str, Any],
                 candidate: dict[str, Any]) -> Any:
    if ratio is not None:
        return ratio
    if reference.get(key) is None or candidate.get(key) is None:
        return NOT_MEASURED
    return "undefined (reference is 0)"


_SUMMARY_COLUMNS = ["label", "iterations", "with overlap", "mean loss", "mean overlap ms",
                    "mean compute ms", "mean all-reduce overlap ms",
                    "mean reduce-scatter overlap ms", "overlap ratio"]


def _page(summary: dict[str, Any], figs: dict[str, dict], notes: list[str]) -> Page:
    page = Page("aorta overlap report")
    page.paragraph("overlap ratio = mean compute–communication overlap ms / mean compute ms "
                   "(upstream aorta's definition), all ranks and iterations pooled per label.",
                   "note")
    page.heading("Summary")
    page.table(_SUMMARY_COLUMNS, _summary_rows(summary["datasets"]))
    if "comparison" in summary:
        c = summary["comparison"]
        ref, cand = (summary["datasets"][c[k]] for k in ("reference", "candidate"))
        page.heading(f"Comparison: {c['candidate']} vs {c['reference']}")
        page.table(["", "value"], [
            [name, NOT_MEASURED if c[key] is None else c[key]] for name, key in (
                ("reference overlap ratio", "reference_overlap_ratio"),
                ("candidate overlap ratio", "candidate_overlap_ratio"),
                ("delta (candidate − reference)", "ratio_delta"))])
        page.table(["metric", "candidate / reference"],
                   [[key, _ratio_shown(key, ratio, ref, cand)]
                    for key, ratio in c["metric_ratios"].items()])
    page.heading("Per rank")
    page.table(_SUMMARY_COLUMNS, [[f"{label} rank {rank}", *row[1:]] for label, ranks in
                                  summary["ranks"].items() for rank, agg in ranks.items()
                                  for row in _summary_rows({label: agg})])
    if notes:
        page.heading("Notes")
        page.bullets(notes)
    page.heading("Figures")
    if not figs:
        page.paragraph("No iteration carries profile.overlap (CPU runs and telemetry.enabled="
                       "false measure no overlap): nothing to plot.", "note")
    for name, fig in figs.items():
        page.figure(name, fig)
    return page


def build_report(pairs: list[tuple[str, Path]], output: Path, reference: str | None = None,
                 candidate: str | None = None, pngs: bool | None = None
                 ) -> tuple[dict[str, Any], list[str]]:
    """Write ``summary.json``, ``report.html`` and the PNGs into ``output``.

    Returns the summary and the notes (problems met and the PNG line) for the user.
    """
    notes: list[str] = []
    datasets: dict[str, Dataset] = {}
    for label, folder in pairs:
        if label in datasets:
            notes.append(f"label {label!r} given twice; its folders are pooled")
        datasets.setdefault(label, Dataset(label, [])).folders.append(Path(folder))
    load(list(datasets.values()), notes)
    df = frame([row for d in datasets.values() for row in d.rows])
    import polars as pl

    summary: dict[str, Any] = {"datasets": {}, "ranks": {}}
    for label in datasets:
        sub = df.filter(pl.col("label") == label)
        summary["datasets"][label] = aggregate(sub)
        summary["ranks"][label] = {
            str(rank): aggregate(sub.filter(pl.col("rank").eq_missing(rank)))
            for rank in sorted(sub["rank"].unique().to_list(), key=lambda r: (r is None, r))}
    if reference and candidate:
        missing = [n for n in (reference, candidate) if n not in datasets]
        if missing:
            notes.append(f"--reference/--candidate {', '.join(missing)} is not a label "
                         f"(labels: {', '.join(datasets)}); no comparison written")
        else:
            summary["comparison"] = {"reference": reference, "candidate": candidate,
                                     **compare(summary["datasets"][reference],
                                               summary["datasets"][candidate])}
    elif reference or candidate:
        notes.append("a comparison needs both --reference and --candidate; none written")
    summary["notes"] = list(notes)
    output.mkdir(parents=True, exist_ok=True)
    write_json_atomic(output / "summary.json", summary)
    figs = _figures(df, list(datasets))
    png_line = _page(summary, figs, notes).write(
        output / "report.html", output if pngs_wanted(pngs) else None, asked=pngs_asked(pngs))
    if png_line:
        notes.append(png_line)
    return summary, notes
