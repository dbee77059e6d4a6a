"""The overlap report: upstream's numbers on upstream-shaped input, our real captures, odd input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from pytest import approx
from reports.report_helpers import FIXTURES, aorta

from aorta_core.reports.overlap_report import OVERLAP_KEYS, build_report

UPSTREAM = FIXTURES / "upstream_shaped"
KEYS = ("count", "mean_loss", "mean_overlap_ms", "mean_compute_ms",
        "mean_allreduce_overlap_ms", "mean_reducescatter_overlap_ms", "overlap_ratio")


def upstream_aggregate(folder: Path) -> dict[str, float]:
    """Upstream's definition, written out independently: pool every line of every rank file,
    missing keys of profile.overlap count as 0, ratio = mean overlap / mean compute."""
    lines = [json.loads(line) for f in sorted(folder.glob("rank_*_metrics.jsonl"))
             for line in f.read_text().splitlines() if line.strip()]
    n = len(lines)

    def mean(get):
        return sum(get(p) for p in lines) / n

    overlap = mean(lambda p: p["profile"]["overlap"]["overlap_ms"].get("compute_comm", 0.0))
    compute = mean(lambda p: p["profile"]["overlap"]["per_stream_ms"].get("compute", 0.0))
    return {
        "count": n,
        "mean_loss": mean(lambda p: p["loss"]),
        "mean_overlap_ms": overlap,
        "mean_compute_ms": compute,
        "mean_allreduce_overlap_ms": mean(
            lambda p: p["profile"]["overlap"]["overlap_ms"].get("compute_allreduce", 0.0)),
        "mean_reducescatter_overlap_ms": mean(
            lambda p: p["profile"]["overlap"]["overlap_ms"].get("compute_reducescatter", 0.0)),
        "overlap_ratio": overlap / compute if compute > 0 else 0.0,
    }


def test_upstream_shaped_input_gives_upstream_numbers(tmp_path):
    done = aorta("report", "overlap", "--log-dir", str(UPSTREAM / "ddp"), "--label", "ddp",
                 "--log-dir", str(UPSTREAM / "fsdp"), "--label", "fsdp", "--output",
                 str(tmp_path / "out"), "--reference", "ddp", "--candidate", "fsdp", "--no-png",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    expected = {label: upstream_aggregate(UPSTREAM / label) for label in ("ddp", "fsdp")}
    for label, agg in expected.items():
        got = summary["datasets"][label]
        assert {k: got[k] for k in KEYS} == approx(agg, rel=1e-12), label
    assert expected["ddp"]["mean_reducescatter_overlap_ms"] == 0.0  # the missing-key path
    assert expected["fsdp"]["mean_reducescatter_overlap_ms"] > 0
    comp = summary["comparison"]
    assert comp["reference_overlap_ratio"] == approx(expected["ddp"]["overlap_ratio"])
    assert comp["ratio_delta"] == approx(expected["fsdp"]["overlap_ratio"]
                                         - expected["ddp"]["overlap_ratio"])
    assert comp["metric_ratios"]["mean_compute_ms"] == approx(
        expected["fsdp"]["mean_compute_ms"] / expected["ddp"]["mean_compute_ms"])
    rank1 = upstream_aggregate_of_file(UPSTREAM / "fsdp/rank_01_metrics.jsonl", tmp_path)
    assert summary["ranks"]["fsdp"]["1"]["overlap_ratio"] == approx(rank1["overlap_ratio"])
    page = (tmp_path / "out/report.html").read_text()
    for div in ("ddp_timeline", "fsdp_timeline", "overlap_breakdown", "overlap_ratio"):
        assert f'id="{div}"' in page
    assert page.count("<script type=\"text/javascript\">/**\n* plotly.js") <= 1


def upstream_aggregate_of_file(path: Path, tmp_path: Path) -> dict[str, float]:
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(path, one / path.name)
    return upstream_aggregate(one)


def test_real_h200_capture(h200_dir, tmp_path):
    summary, notes = build_report([("h200", h200_dir)], tmp_path, pngs=False)
    lines = [json.loads(x) for x in (h200_dir / "rank_00_metrics.jsonl").read_text().splitlines()]
    agg = summary["datasets"]["h200"]
    assert agg["count"] == len(lines) == 20
    # Independent: our top-level copies of the overlap fields, not profile.overlap.
    compute = sum(x["compute_ms"] for x in lines) / 20
    assert agg["mean_compute_ms"] == approx(compute)
    assert agg["mean_idle_ms"] == approx(sum(x["idle_ms"] for x in lines) / 20)
    assert agg["overlap_ratio"] == approx(sum(x["compute_comm_ms"] for x in lines) / 20 / compute)
    assert summary["ranks"]["h200"]["0"]["count"] == 20
    assert not [n for n in notes if "skipped" in n and "PNG" not in n]


def test_real_cpu_benchmark_run_has_no_overlap_and_says_so(cpu_benchmark, tmp_path):
    summary, notes = build_report([("cpu", cpu_benchmark)], tmp_path, pngs=False)
    agg = summary["datasets"]["cpu"]
    assert agg["count"] == 3 and agg["overlap_iterations"] == 0
    assert agg["overlap_ratio"] is None and agg["mean_loss"] > 0
    assert any("3 iteration(s) without profile.overlap" in n for n in notes)
    assert "nothing to plot" in (tmp_path / "report.html").read_text()


def test_odd_input_is_reported_and_good_data_kept(tmp_path, h200_dir):
    bad = tmp_path / "bad"
    bad.mkdir()
    good = (UPSTREAM / "ddp/rank_00_metrics.jsonl").read_text().splitlines()
    (bad / "rank_00_metrics.jsonl").write_text(
        "\n".join([good[0], "{not json", "[1, 2]", good[1], good[2][:40]]) + "\n")
    (tmp_path / "empty").mkdir()
    done = aorta("report", "overlap", "--log-dir", str(bad), "--log-dir", str(tmp_path / "empty"),
                 "--log-dir", str(h200_dir), "--label", "bad", "--label", "empty",
                 "--output", str(tmp_path / "out"), "--reference", "bad", "--candidate", "nope",
                 "--no-png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    err = " ".join(done.stderr.split())
    assert "--log-dir and --label counts differ (3 vs 2)" in err
    assert "3 malformed line(s) skipped (first: line 2)" in err
    assert f"no rank_*_metrics.jsonl in {tmp_path / 'empty'}" in err
    assert "nope is not a label" in err
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert summary["datasets"]["bad"]["count"] == 2
    assert summary["datasets"]["empty"] == {"count": 0}
    assert summary["datasets"][h200_dir.name]["count"] == 20  # unlabelled folder: its own name
    assert "comparison" not in summary


def test_no_data_at_all_exits_1(tmp_path):
    done = aorta("report", "overlap", "--log-dir", str(tmp_path), "--label", "x", "--output",
                 str(tmp_path / "out"), "--no-png", cwd=tmp_path)
    assert done.returncode == 1
    assert "no iteration records found" in done.stderr


def _page_text(page: str) -> str:
    """What a reader sees of a page: no scripts, no tags, one space between words."""
    page = re.sub(r"<script.*?</script>", " ", page, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def _plots(page: str) -> list[str]:
    """The arguments of each plotly call of a page (a figure's id, data and layout)."""
    return re.findall(r"Plotly\.newPlot\((.*?)\)\s*};", page, flags=re.S)


def test_gloo_cpu_runs_compared_show_not_measured_never_zero(cpu_gloo_run, tmp_path):
    """Two labels of a real 2-rank gloo run: nothing of the overlap was measured, so the
    comparison holds null (it said 0.0, 0.0 and a delta of 0.0) and every table says so."""
    done = aorta("report", "overlap", "--log-dir", str(cpu_gloo_run), "--label", "ddp-cpu",
                 "--log-dir", str(cpu_gloo_run), "--label", "again-cpu", "--reference",
                 "ddp-cpu", "--candidate", "again-cpu", "--output", str(tmp_path / "out"),
                 "--no-png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    comp = summary["comparison"]
    assert comp["reference_overlap_ratio"] is None and comp["candidate_overlap_ratio"] is None
    assert comp["ratio_delta"] is None
    assert comp["metric_ratios"]["mean_loss"] == approx(1.0)
    assert {k for k, v in comp["metric_ratios"].items() if v is None} == set(OVERLAP_KEYS)
    for agg in (summary["datasets"]["ddp-cpu"], *summary["ranks"]["ddp-cpu"].values()):
        assert agg["overlap_iterations"] == 0 and agg["count"] > 0
        assert {k: agg[k] for k in OVERLAP_KEYS} == dict.fromkeys(OVERLAP_KEYS)
    assert set(summary["ranks"]["ddp-cpu"]) == {"0", "1"}
    text = _page_text((tmp_path / "out/report.html").read_text())
    assert "reference overlap ratio not measured candidate overlap ratio not measured delta " \
           "(candidate − reference) not measured" in text
    assert "mean_overlap_ms not measured" in text and "mean_loss 1 " in text
    # Summary and per-rank rows: count, iterations with overlap 0, loss, then 5 not measured.
    assert re.search(r"ddp-cpu 8 0 [0-9.]+( not measured){5} ", text)
    assert re.search(r"ddp-cpu rank 1 4 0 [0-9.]+( not measured){5} ", text)
    assert " 0.0 " not in text and "—" not in text


def test_unmeasured_side_stays_out_of_every_figure(cpu_gloo_run, tmp_path):
    """A measured label (upstream-shaped files) against the gloo CPU run: the figures show the
    measured one only; the comparison's unmeasured side and its delta are null."""
    summary, _ = build_report([("ddp", UPSTREAM / "ddp"), ("gloo-cpu", cpu_gloo_run)],
                              tmp_path, reference="ddp", candidate="gloo-cpu", pngs=False)
    comp = summary["comparison"]
    assert comp["reference_overlap_ratio"] == approx(upstream_aggregate(UPSTREAM / "ddp")[
        "overlap_ratio"])
    assert comp["candidate_overlap_ratio"] is None and comp["ratio_delta"] is None
    assert comp["metric_ratios"]["mean_compute_ms"] is None
    page = (tmp_path / "report.html").read_text()
    plots = _plots(page)
    assert len(plots) == 3 and all("ddp" in plot for plot in plots)  # timeline, bars, box
    assert not [plot for plot in plots if "gloo-cpu" in plot]
    assert 'id="ddp_timeline"' in page and 'id="gloo-cpu_timeline"' not in page
    text = _page_text(page)
    assert "candidate overlap ratio not measured delta (candidate − reference) not measured" \
        in text
