"""``agreement.json``: do the profilers of a ``sweep=agree`` agree with each other and with the
payload's own clock, and what does each cost in wall time?

Built from the trial records and ``cell.json`` files (:func:`aorta_core.engine.matrix.scan`),
never from the matrix, so that it can be rebuilt at any time: at the end of every sweep, by
``aorta matrix`` and by ``aorta agree``. Every field is described in docs/reports.md
("agreement.json"); the verdict rules in docs/profiling.md.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aorta_core.api.kernel_names import kernel_key, signature
from aorta_core.engine.matrix import WALL, scan
from aorta_core.engine.records import VERDICTS, TrialRecord, write_json_atomic
from aorta_core.reports import significance

SCHEMA_VERSION = 1
AGREEMENT_NAME = "agreement.json"
#: The metrics of the collector contract that two profilers can both measure (docs/plugins.md).
METRICS = ("gpu_time_ms", "kernel_count", "top_kernel_ms")
TOP_KERNELS = "top_kernels"
#: The source name of the payload's own timing (the bare cell's) among the collectors.
REFERENCE = "reference"
BARE = "bare"
#: Significance level of the overhead test, as ``aorta compare``'s default.
ALPHA = 0.05
_UNITS = (("_ms", "ms"), ("_us", "µs"), ("_s", "s"))


@dataclass
class _Cell:
    """One cell of the agreement sweep: ``collector`` is ``None`` for the bare cell."""

    name: str
    collector: str | None
    times_comparable: bool
    passing: list[TrialRecord]
    trials: dict[str, int]
    skipped: str | None
    error: str | None
    #: The sweep's ``agree`` block of ``cell.json`` (tolerance, reference).
    marker: dict[str, Any]

    @property
    def label(self) -> str:
        return self.collector or BARE

    def unmeasured(self, metric: str) -> str:
        """Why this cell has no value of ``metric`` (the long reason is in ``collectors``)."""
        if self.skipped:
            return "not measured: left out"
        if self.error:
            return "not measured: the cell could not run"
        if not self.passing:
            return "not measured: no passing trial"
        return f"not measured: no passing trial reported {metric}"


def _cells(output: Path) -> list[_Cell]:
    described, records, _bad = scan(output)
    by_cell: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_cell.setdefault(record.cell, []).append(record)
    cells = []
    for entry in described:
        marker = entry.get("agree")
        if not isinstance(marker, dict):
            continue
        mine = sorted(by_cell.get(str(entry["cell"]), []), key=lambda r: r.trial)
        trials = {v: sum(r.verdict == v for r in mine) for v in VERDICTS}
        cells.append(_Cell(str(entry["cell"]), marker.get("collector"),
                           marker.get("times_comparable") is not False,
                           [r for r in mine if r.verdict == "pass"],
                           {**trials, "total": len(mine)}, entry.get("skipped"),
                           entry.get("error"), marker))
    return sorted(cells, key=lambda c: (c.collector is not None, c.name))  # bare first


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _unit(metric: str) -> str:
    return next((unit for suffix, unit in _UNITS if metric.endswith(suffix)), "")


def _num(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def _gap_pct(a: float, b: float) -> float:
    """How far apart two values are, in % of the smaller one."""
    low, high = sorted((a, b))
    if high == low:
        return 0.0
    return (high - low) * 100.0 / low if low > 0 else math.inf


def _pct(value: float, tolerance: float) -> str:
    """``value`` with enough decimals that it never reads as equal to a tolerance it exceeds."""
    digits = 1
    while round(value, digits) == tolerance and digits < 6:
        digits += 1
    return "∞" if math.isinf(value) else f"{value:.{digits}f}"


def _summary(values: list[float]) -> dict[str, Any]:
    """n, median, min, max and MAD (median absolute deviation), ``None`` where there is none."""
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "mad": None}
    median = statistics.median(values)
    return {"n": len(values), "median": median, "min": min(values), "max": max(values),
            "mad": statistics.median(abs(v - median) for v in values)}


def _source(cell: _Cell, metric: str, time: bool) -> dict[str, Any]:
    """One column of a metric table: ``cell``'s passing values of ``metric``."""
    pairs = [(r.trial, v) for r in cell.passing if (v := _number(r.metrics.get(metric)))
             is not None]
    values = [v for _, v in pairs]
    out: dict[str, Any] = {"metric": metric, "cell": cell.name, **_summary(values),
                           "trials": [t for t, _ in pairs], "values": values,
                           "comparable": not time or cell.times_comparable,
                           "deviation_pct": None, "status": None, "verdict": None}
    if not values:
        out["status"], out["verdict"] = "not measured", cell.unmeasured(metric)
    elif not out["comparable"]:
        out["status"] = "not comparable"
        out["verdict"] = (f"not comparable: {cell.label} changes what it times "
                          "(times_comparable=false)")
    return out


def _pair(a: tuple[str, float], b: tuple[str, float], tolerance: float,
          unit: str) -> tuple[str, str]:
    """(status, verdict) of two sources' medians: ``agree`` when within ``tolerance`` %."""
    gap = _gap_pct(a[1], b[1])
    if gap <= tolerance:
        return "agree", f"agree within {_pct(gap, tolerance)} %"
    suffix = f" {unit}" if unit else ""
    return "disagree", (f"disagree: {a[0]} {_num(a[1])}{suffix} vs {b[0]} {_num(b[1])}{suffix}, "
                        f"{_pct(gap, tolerance)} % > {tolerance:g} %")


def _judge(metric: str, sources: dict[str, dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """Consensus, deviations and verdicts of one metric over its sources: a source against the
    one furthest from it, the metric between its largest and smallest median, so that the
    metric agrees exactly when every source does."""
    unit = _unit(metric)
    medians = {n: s["median"] for n, s in sources.items() if s["n"] and s["comparable"]}
    consensus = statistics.median(medians.values()) if medians else None
    for name, source in sources.items():
        if source["n"] and consensus:
            source["deviation_pct"] = (source["median"] - consensus) * 100.0 / consensus
        if name in medians and len(medians) == 1:
            source["status"] = "only one source"
            source["verdict"] = f"only one source: nothing to compare {name} with"
        elif name in medians:
            other = max((o for o in medians if o != name),
                        key=lambda o: _gap_pct(medians[name], medians[o]))
            source["status"], source["verdict"] = _pair(
                (name, medians[name]), (other, medians[other]), tolerance, unit)
    out: dict[str, Any] = {"unit": unit, "consensus": consensus, "spread_pct": None}
    if len(medians) >= 2:
        high, low = max(medians, key=medians.get), min(medians, key=medians.get)
        out["spread_pct"] = _gap_pct(medians[high], medians[low])
        out["status"], out["verdict"] = _pair((high, medians[high]), (low, medians[low]),
                                              tolerance, unit)
    elif medians:
        ((name, median),) = medians.items()
        out["status"] = "only one source"
        out["verdict"] = f"only one source: {name} {_num(median)}{f' {unit}' if unit else ''}"
    elif any(s["n"] for s in sources.values()):
        out["status"] = "not comparable"
        out["verdict"] = "not comparable: " + "; ".join(
            f"{n}: {s['verdict'].removeprefix('not comparable: ')}"
            for n, s in sources.items() if s["status"] == "not comparable")
    else:
        out["status"], out["verdict"] = "not measured", "not measured: no source reported it"
    return {**out, "sources": sources}


def _top_lists(cells: list[_Cell]) -> dict[str, list[str]]:
    """Each collector's hottest kernel names, from its first passing trial that lists them."""
    lists = {}
    for cell in cells:
        for record in cell.passing:
            names = record.metrics.get(f"{cell.collector}_{TOP_KERNELS}")
            if isinstance(names, list) and names:
                lists[cell.label] = [str(n) for n in names]
                break
    return lists


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _hottest_check(sources: dict[str, dict[str, Any]], lists: dict[str, list[str]]) -> None:
    """``top_kernel_ms`` compares only the collectors that name the same hottest kernel (the one
    most of them name); the others' times are of another kernel."""
    hottest = {n: lists[n][0] for n, s in sources.items()
               if s["n"] and s["comparable"] and n in lists}
    counts = Counter(kernel_key(name) for name in hottest.values()).most_common()
    mode = counts[0][0] if len(counts) == 1 or (counts and counts[0][1] > counts[1][1]) else None
    theirs = next((name for name in hottest.values() if kernel_key(name) == mode), None)
    others = f"{_short(signature(theirs))}, the others' hottest" if theirs else "the others'"
    for source_name, name in hottest.items():
        if kernel_key(name) != mode:
            source = sources[source_name]
            source["comparable"], source["status"] = False, "not comparable"
            source["verdict"] = (f"not comparable: its hottest kernel "
                                 f"{_short(signature(name))} is not {others}")


def _top_kernels(lists: dict[str, list[str]]) -> dict[str, Any]:
    """The hottest kernels of every collector, matched by :func:`kernel_key`."""
    kernels: dict[str, dict[str, Any]] = {}
    keys: dict[str, set[str]] = {}
    for source, names in lists.items():
        keys[source] = set()
        for rank, name in enumerate(names, 1):
            key = kernel_key(name)
            keys[source].add(key)
            entry = kernels.setdefault(key, {"key": key, "name": signature(name), "ranks": {},
                                             "names": {}})
            entry["ranks"].setdefault(source, rank)
            entry["names"].setdefault(source, name)
    sources = list(lists)
    pairs = []
    for i, a in enumerate(sources):
        for b in sources[i + 1:]:
            shared, union = keys[a] & keys[b], keys[a] | keys[b]
            pairs.append({"a": a, "b": b, "shared": len(shared), "union": len(union),
                          "jaccard": len(shared) / len(union)})
    hottest = {s: kernel_key(names[0]) for s, names in lists.items()}
    return {
        "sources": sources,
        "kernels": sorted(kernels.values(), key=lambda k: (min(k["ranks"].values()),
                                                           -len(k["ranks"]), k["key"])),
        "pairs": pairs,
        "in_all": len(set.intersection(*keys.values())) if len(keys) >= 2 else None,
        "hottest": hottest,
        "hottest_agrees": len(set(hottest.values())) == 1 if len(hottest) >= 2 else None,
    }


def _walls(cell: _Cell) -> list[float]:
    return [w for r in cell.passing if (w := _number(r.wall_time_s)) is not None]


def _overhead(cell: _Cell, bare: _Cell | None) -> dict[str, Any]:
    """Median wall time over the bare cell's; its test is set by :func:`_overheads`."""
    mine, base = _walls(cell), _walls(bare) if bare else []
    out: dict[str, Any] = {"cell": cell.name, "n": len(mine), "n_bare": len(base),
                           "median_s": statistics.median(mine) if mine else None,
                           "bare_median_s": statistics.median(base) if base else None,
                           "ratio": None, "overhead_pct": None, "p_value": None, "q": None,
                           "significant": None}
    if not mine or not base:
        missing = cell if not mine else bare
        out["verdict"] = (missing.unmeasured(WALL) if missing else
                          "not measured: the sweep has no bare cell")
        return out
    ratio = out["median_s"] / out["bare_median_s"]
    out |= {"ratio": ratio, "overhead_pct": (ratio - 1.0) * 100.0}
    return out


def _overheads(collectors: list[_Cell], bare: _Cell | None) -> dict[str, dict[str, Any]]:
    """Each collector's :func:`_overhead`, the wall times tested against the bare cell's
    (Mann–Whitney U; the collectors' tests are one family of q-values)."""
    out = {c.label: _overhead(c, bare) for c in collectors}
    tested = [c for c in collectors if out[c.label]["ratio"] is not None]
    stats = significance.compare_rows([_walls(bare) for _ in tested],
                                      [_walls(c) for c in tested], ALPHA)
    for cell, s in zip(tested, stats, strict=True):
        entry = out[cell.label]
        entry |= {"p_value": s.p, "q": s.q,
                  "significant": None if s.p is None else s.significant}
        test = s.untested or (f"p = {s.p:.2g}, q = {s.q:.2g}, "
                              f"{'significant' if s.significant else 'not significant'}")
        entry["verdict"] = f"{entry['ratio']:.3g}x the bare wall time ({test})"
    return out


#: How :func:`_reference_reason` computes the GPU's busy share of the payload's own span.
BUSY_FORMULA = ("busy share = <collector>_gpu_time_ms / <reference> of the same trial (the sum "
                "of kernel durations over the payload's own span), median over the collector's "
                "passing trials; idle = 1 - busy share")


def _share(cell: _Cell, reference: str,
           bare_span: float | None) -> dict[str, Any] | None:
    """``cell``'s kernel time over the payload's span, trial by trial (the bare cell's median
    span where the collector's cell has no reference of its own)."""
    pairs = [(k, r.metrics.get(reference)) for r in cell.passing
             if (k := _number(r.metrics.get(f"{cell.collector}_gpu_time_ms"))) is not None]
    same = [(k, span) for k, raw in pairs if (span := _number(raw)) is not None and span > 0]
    spans = "same trial" if same else "bare cell's median"
    if not same and bare_span:
        same = [(k, bare_span) for k, _ in pairs]
    if not same:
        return None
    kernels, span = statistics.median(k for k, _ in same), statistics.median(s for _, s in same)
    busy = statistics.median(k / s for k, s in same)
    return {"busy_share": busy, "idle_share": max(0.0, 1.0 - busy), "kernel_ms": kernels,
            "span_ms": span, "outside_ms": max(0.0, kernels - span), "n": len(same),
            "span_from": spans}


def _reference_reason(cells: list[_Cell], reference: str, entry: dict[str, Any],
                      tolerance: float) -> dict[str, Any] | None:
    """Why the payload's own timing disagrees with every comparable profiler's GPU time: the
    share of its span the GPU was busy (:data:`BUSY_FORMULA`), and kernel time beyond the span.
    ``None`` when the reference agrees with any of them or nothing can be computed."""
    sources = entry["sources"]
    ref = sources.get(REFERENCE)
    profilers = {n for n, s in sources.items()
                 if n != REFERENCE and s["n"] and s["comparable"]}
    if not ref or not ref["n"] or not profilers or any(
            _gap_pct(ref["median"], sources[n]["median"]) <= tolerance for n in profilers):
        return None
    shares = {c.label: share for c in cells if c.label in profilers
              and (share := _share(c, reference, ref["median"])) is not None}
    if not shares:
        return None
    busy = statistics.median(s["busy_share"] for s in shares.values())
    each = ", ".join(f"{n} {s['kernel_ms']:.4g} ms of kernels in {s['span_ms']:.4g} ms"
                     for n, s in shares.items())
    if busy <= 1.0:
        text = (f"the GPU was busy {busy * 100:.0f} % of the reference span (idle "
                f"{(1.0 - busy) * 100:.0f} %): {each}; the span holds more than kernels "
                "(host work, waits, launches)")
    else:
        text = (f"kernel time is {busy:.3g}x the reference span: {each}; kernels fall outside "
                "the span (or run concurrently on several streams)")
    return {"busy_share": busy, "idle_share": max(0.0, 1.0 - busy), "collectors": shares,
            "formula": BUSY_FORMULA, "text": text}


def build_agreement(output: Path, tolerance_pct: float | None = None) -> dict[str, Any] | None:
    """The agreement of the ``sweep=agree`` in ``output``; ``None`` when it holds none.

    ``tolerance_pct`` replaces the sweep's ``agree.tolerance_pct``.
    """
    cells = _cells(Path(output))
    if not cells:
        return None
    bare = next((c for c in cells if c.collector is None), None)
    collectors = [c for c in cells if c.collector is not None]
    marker = cells[0].marker
    tolerance = float(marker.get("tolerance_pct", 10.0) if tolerance_pct is None
                      else tolerance_pct)
    reference = marker.get("reference") or None
    found = bool(reference) and any(_number(r.metrics.get(reference)) is not None
                                    for c in cells for r in c.passing)
    lists = _top_lists(collectors)
    metrics = {}
    for metric in METRICS:
        sources = {c.label: _source(c, f"{c.collector}_{metric}", metric != "kernel_count")
                   for c in collectors}
        if metric == "gpu_time_ms" and found and bare is not None:
            sources[REFERENCE] = _source(bare, reference, True)
        if metric == "top_kernel_ms":
            _hottest_check(sources, lists)
        metrics[metric] = _judge(metric, sources, tolerance)
        if metric == "gpu_time_ms" and found:
            reason = _reference_reason(collectors, reference, metrics[metric], tolerance)
            metrics[metric]["reference_reason"] = reason
            if reason is not None:
                ref_source = metrics[metric]["sources"][REFERENCE]
                ref_source["verdict"] = f"{ref_source['verdict']}; why: {reason['text']}"
                if metrics[metric].get("status") == "disagree":
                    metrics[metric]["verdict"] += f"; the reference: {reason['text']}"
    if found:
        metrics[reference] = _judge(reference, {c.label: _source(c, reference, True)
                                                for c in cells}, tolerance)
    return {
        "schema_version": SCHEMA_VERSION,
        "output": str(Path(output).resolve()),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tolerance_pct": tolerance,
        "alpha": ALPHA,
        "test": significance.TEST_NAME,
        "reference": {"metric": reference, "found": found},
        "bare": None if bare is None else {"cell": bare.name, "trials": bare.trials,
                                           WALL: _summary(_walls(bare))},
        "collectors": {c.label: {"cell": c.name, "trials": c.trials, "skipped": c.skipped,
                                 "error": c.error, "times_comparable": c.times_comparable,
                                 "rounds": c.marker.get("rounds")}
                       for c in collectors},
        "metrics": metrics,
        "overhead": _overheads(collectors, bare),
        TOP_KERNELS: _top_kernels(lists),
    }


def write_agreement(output: Path, tolerance_pct: float | None = None) -> Path | None:
    """Write ``<output>/agreement.json`` atomically; ``None`` (nothing written) when ``output``
    holds no agreement sweep."""
    agreement = build_agreement(output, tolerance_pct)
    if agreement is None:
        return None
    path = Path(output) / AGREEMENT_NAME
    write_json_atomic(path, agreement)
    return path
