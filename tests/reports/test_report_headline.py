"""report.html leads with the answer (issue 26): the headline of real sweeps of the default,
grid, repeat and agree recipes (which metrics, which baseline, each difference and its
significance, the agree verdicts), constant metrics folded, a missing value 'not measured', the
sweep's axis on the figures' x-axis, and the page in headless Chromium. CPU only (NO_GPU)."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import sys
from pathlib import Path

import polars as pl
import pytest
from needs import NO_GPU, needs
from reports.page_tables import Table, read_page
from reports.report_helpers import REPO, aorta
from reports.test_report_browser import _render

from aorta_core.reports.html import fmt
from aorta_core.reports.matrix_files import passing_values
from aorta_core.reports.significance import compare_rows, inconclusive, min_trials
from aorta_core.reports.sweep import _build_page, write_sweep_report

#: A payload whose ``step_ms`` differs by trial, ``steps`` never, and ``extra_ms`` is only
#: reported in the cell with MODE=a.
PAYLOAD = ("import json, os; t = int(os.environ['AORTA_TRIAL']); m = {'step_ms': 10 + t, "
           "'steps': 5}; m.update({'extra_ms': 3.0 + t} if os.environ['MODE'] == 'a' else {}); "
           "json.dump(m, open(os.environ['AORTA_METRICS_PATH'], 'w'))")
#: ``step_ms`` scaled by K: 10-12 (-13) against 80-96 (-104), 8x slower.
SCALED = ("import json, os; t = int(os.environ['AORTA_TRIAL']); k = int(os.environ['K']); "
          "json.dump({'step_ms': k * (10 + t)}, open(os.environ['AORTA_METRICS_PATH'], 'w'))")
H200_README = REPO / "bench/gpu_evidence/h200-2026-12-03/readme/run/matrix.json"
HEADLINE_COLUMNS = ["metric", "cell", "median ± std (n)", "Δ vs baseline", "Δ %", "significance"]


def _sweep(root: Path, name: str, *args: str) -> Path:
    """A real sweep; a failed trial (exit status 1) is allowed, as long as every cell that ran
    kept a passing one: the 2-rank CPU benchmark's rank 0 has been seen to abort at exit on a
    loaded machine ('terminate called without an active exception' after its metrics were
    written), and the headline is then built from the trials that passed."""
    out = root / name
    done = aorta(f"output={out}", *args, cwd=root, env=NO_GPU)
    assert done.returncode in (0, 1) and (out / "matrix.json").is_file(), done.stderr
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    assert all(c["trials"]["pass"] for c in cells if c["trials"]["total"]), done.stdout
    return out


#: Each recipe's sweep, run by the first test that reads it (within that test's time limit).
SWEEPS = {
    "default": (),
    "grid": ("sweep=grid", "workload.steps=5"),
    # torchprof alone: `auto` would take every collector that attaches here (ncu on a GPU host)
    "agree": ("sweep=agree", "trials=2", "agree.collectors=[torchprof]", "--", sys.executable,
              "-m", "aorta_core.workloads.tiny", "--steps", "5"),
    "modes": ("-m", "sweep=repeat", "trials=2", "+env.MODE=a,b", "--", sys.executable, "-c",
              PAYLOAD),
    **{f"scaled{n}": ("-m", "sweep=repeat", f"trials={n}", "+env.K=1,8", "--", sys.executable,
                      "-c", SCALED) for n in (3, 4)},
}


class _Runs(dict):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Path:
        self[name] = _sweep(self.root, name, *SWEEPS[name])
        return self[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return _Runs(tmp_path_factory.mktemp("headline"))


def _headline(out: Path) -> tuple[Table, list[str], list[Table]]:
    """The headline's metric table, its paragraphs, and every table in it."""
    page = read_page(out / "report.html")
    tables = [t for t in page.tables if t.section == "headline"]
    metric = [t for t in tables if "headline" in t.classes]
    assert len(metric) == 1, [t.heading for t in tables]
    assert [h.text for h in metric[0].header] == HEADLINE_COLUMNS
    return metric[0], [p for s, p in page.paragraphs if s == "headline"], tables


def _metrics(table: Table) -> list[str]:
    """The headline's numeric metrics (by their own names, which the shown name's hover holds),
    in order."""
    return list(dict.fromkeys(c.title for c in table.column("metric")
                              if not c.text.endswith(": hottest")))


def _check_against_baseline(out: Path, table: Table, baseline: str) -> None:
    """Every row of a cell other than the baseline: the difference of medians (matrix.json) and
    the U test's p and q over the headline's tested rows (one family), from the trials' values
    in matrix.parquet, or, with fewer than :func:`min_trials` on a side, no test."""
    matrix = json.loads((out / "matrix.json").read_text())
    medians = {c["cell"]: {m: s["median"] for m, s in c["metrics_summary"].items()}
               for c in matrix["cells"]}
    values = passing_values(out)
    tested = []
    for row in table.rows:
        metric, cell = row[0].title, row[1].title or row[1].text.removesuffix(" (baseline)")
        if row[0].text.endswith(": hottest"):
            continue
        if row[1].text.endswith(" (baseline)"):
            assert cell == baseline
            assert [c.text for c in row[3:]] == ["", "", ""]
            continue
        delta = medians[cell][metric] - medians[baseline][metric]
        assert row[3].text == ("+" if delta > 0 else "") + fmt(delta)
        pct = delta / abs(medians[baseline][metric]) * 100
        assert row[4].text == ("+" if pct > 0 else "") + fmt(pct) + " %"
        side = [values.filter((pl.col("cell") == c) & (pl.col("metric") == metric))["value"]
                .to_list() for c in (baseline, cell)]
        tested.append((row, side))
    stats = compare_rows([b for _, (b, _) in tested], [c for _, (_, c) in tested])
    for (row, side), s in zip(tested, stats, strict=True):
        if min(map(len, side)) < min_trials(0.05):
            assert row[5].text == inconclusive(0.05)
        else:
            word = "significant" if s.q <= 0.05 else "not significant"
            assert row[5].text == f"{word} (p = {s.p:.2g}, q = {s.q:.2g})"
    checked = len(tested)
    assert checked


def test_default_sweep_headline(runs):
    out = runs["default"]
    table, paragraphs, _ = _headline(out)
    first = json.loads((out / "matrix.json").read_text())["cells"][0]["cell"]
    assert paragraphs[0].startswith(f"Baseline: {first} (the sweep's first cell in matrix.json)")
    # The benchmark on CPU: throughput, FLOP rate, step time (no compute fraction or overlap:
    # streams exist on GPUs only).
    assert _metrics(table) == ["workload_samples_per_s", "workload_tflops",
                               "workload_step_time_ms"]
    assert [c.text for c in table.column("metric")][:2] == ["workload samples (per s)"] * 2
    assert table.column("metric")[2].text == "workload (TFLOP/s)"
    _check_against_baseline(out, table, first)


def test_h200_benchmark_headline(tmp_path):
    """The H200 README run (DDP vs FSDP, committed matrix.json only): the GPU benchmark's
    headline adds compute fraction and overlap; the page is built without matrix.parquet."""
    shutil.copy(H200_README, tmp_path / "matrix.json")
    write_sweep_report(tmp_path, pngs=False)
    table, paragraphs, _ = _headline(tmp_path)
    assert paragraphs[0].startswith("Baseline: workload.parallel=ddp (the sweep's first cell")
    assert _metrics(table) == ["workload_samples_per_s", "workload_tflops",
                               "workload_step_time_ms", "workload_compute_fraction",
                               "workload_overlap_ratio"]
    tflops = [[c.text for c in row[1:]] for row in table.rows
              if row[0].title == "workload_tflops"]
    assert tflops == [["workload.parallel=ddp (baseline)", "395.3 ± 0.07329 (n=2)", "", "", ""],
                      ["workload.parallel=fsdp", "387.8 ± 2.094 (n=2)", "-7.495", "-1.896 %",
                       inconclusive(0.05)]]


def test_grid_headline_and_axes(runs):
    out = runs["grid"]
    table, paragraphs, _ = _headline(out)
    matrix = json.loads((out / "matrix.json").read_text())
    cells = [c["cell"] for c in matrix["cells"]]
    assert paragraphs[0].startswith(f"Baseline: {cells[0]} ")
    assert _metrics(table) == ["workload_samples_per_s", "workload_step_time_ms"]
    assert len(table.rows) == 2 * len(cells) == 8
    _check_against_baseline(out, table, cells[0])
    # The figures' x-axis is the first axis that tells cells apart (batch size; steps=5 is the
    # same everywhere), one box per hidden width.
    fig = _build_page(out, None).figures["spread_workload_step_time_ms"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "workload.batch_size"
    assert sorted(t["name"] for t in fig["data"]) == ["hidden=256", "hidden=64"]
    assert sorted(set(x for t in fig["data"] for x in t["x"])) == ["16", "64"]


def test_repeat_headline(sweeps):
    out = sweeps["fast"]  # one cell; workload_step_ms = 10 to 14
    aorta("report", "sweep", str(out), cwd=out.parent)
    table, paragraphs, _ = _headline(out)
    assert "One cell: nothing to compare it with." in paragraphs
    assert _metrics(table) == ["workload_step_ms"]
    (row,) = table.rows
    assert row[0].text == "workload step (ms)" and row[1].text.endswith(" (baseline)")
    steps = range(10, 15)
    assert [c.text for c in row[2:]] == [
        f"{fmt(statistics.median(steps))} ± {fmt(statistics.stdev(steps))} (n=5)", "", "", ""]


@needs("aorta_torchprof")
def test_agree_headline_leads_with_the_verdicts(runs):
    out = runs["agree"]
    table, paragraphs, tables = _headline(out)
    assert paragraphs[0].startswith("Baseline: bare (the bare cell: ")
    agreement = json.loads((out / "agreement.json").read_text())
    (verdicts,) = [t for t in tables if t.heading == "Do the profilers agree?"
                   and "headline" not in t.classes]
    assert [[c.text for c in row] for row in verdicts.rows] == [
        *([m, e["verdict"]] for m, e in agreement["metrics"].items()),
        *([f"{c} overhead", e["verdict"]] for c, e in agreement["overhead"].items())]
    matrix = json.loads((out / "matrix.json").read_text())
    idle = [c["cell"] for c in matrix["cells"] if not c["trials"]["pass"]]
    ran = [c["cell"] for c in matrix["cells"] if c["trials"]["pass"]]
    if idle:
        assert f"Not in the headline (no passing trial): {', '.join(idle)}." in paragraphs
    shown = {c.title or c.text.removesuffix(" (baseline)") for c in table.column("cell")}
    assert shown == set(ran)
    assert _metrics(table)[:2] == ["workload_samples_per_s", "workload_step_time_ms"]
    _check_against_baseline(out, table, "bare")


@pytest.mark.parametrize("trials", [3, 4])
def test_no_significance_claim_below_the_minimum_trials(runs, trials):
    """8x slower with 3 trials a side: the exact U test cannot go below p = 0.1, so the
    headline says it is inconclusive and colours nothing. With 4 it tests (p = 2/70, one
    headline row: q = p), and a significant slowdown is red."""
    out = runs[f"scaled{trials}"]
    table, paragraphs, _ = _headline(out)
    assert "made with at least 4 trials on each side" in paragraphs[0]
    (row,) = [r for r in table.rows if r[1].text == "env.K=8"]
    fast, slow = [10 + t for t in range(trials)], [8 * (10 + t) for t in range(trials)]
    if trials < min_trials(0.05):
        significance, css = inconclusive(0.05), None
    else:
        p = 2 / math.comb(2 * trials, trials)  # all apart: the most extreme split, both tails
        significance, css = f"significant (p = {p:.2g}, q = {p:.2g})", "bad"
    delta = statistics.median(slow) - statistics.median(fast)
    assert [c.text for c in row[3:]] == [f"+{delta:g}", "+700 %", significance]
    headline = re.search(r"<table class='headline'>(.*?)</table>",
                         (out / "report.html").read_text(), re.S).group(1)
    assert re.findall(r"<span class=(\w+)>", headline) == ([css] * 2 if css else [])


def test_constant_metrics_fold_and_a_missing_value_is_not_measured(runs):
    out = runs["modes"]
    page = read_page(out / "report.html")
    folds = [p for s, p in page.paragraphs if p.startswith("Same in every cell")]
    assert folds == ["Same in every cell (every trial): workload steps = 5"]
    html = (out / "report.html").read_text()
    assert 'id="spread_workload_steps"' not in html and 'id="spread_workload_step_ms"' in html
    groups = [t for t in page.tables if "group" in t.classes]
    (time,) = [t for t in groups if t.heading == "time"]
    assert _group_metrics(time) == ["wall_time_s", "workload_extra_ms", "workload_step_ms"]
    assert "workload_steps" not in [m for t in groups for m in _group_metrics(t)]
    assert _group_value(time, "workload_extra_ms", "env.MODE=b") == "not measured"
    assert _group_value(time, "workload_extra_ms", "env.MODE=a") == "3.5 ± 0.7071"
    assert _group_value(time, "workload_step_ms", "env.MODE=b") == "10.5 ± 0.7071"
    fig = _build_page(out, None).figures["spread_workload_step_ms"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "env.MODE"


def _group_metrics(table: Table) -> list[str]:
    """A group table's metrics (own names), whichever way it is laid out."""
    if table.header[0].text == "metric":  # cells as columns
        return [row[0].title for row in table.rows]
    return [h.title for h in table.header[1:]]


def _group_value(table: Table, metric: str, cell: str) -> str:
    if table.header[0].text == "metric":
        row = next(r for r in table.rows if r[0].title == metric)
        return row[[h.text for h in table.header].index(cell)].text
    column = [h.title for h in table.header].index(metric)
    return next(r for r in table.rows if r[0].text == cell)[column].text


def test_headline_and_sortable_table_in_chromium(browser, runs, tmp_path):
    dom, log = _render(browser, runs["default"] / "report.html", tmp_path / "profile")
    headline = re.search(r'<section id="headline">(.*?)</section>', dom, re.S)
    assert headline and "Baseline:" in headline.group(1)
    assert '<table class="headline">' in headline.group(1)
    cells = re.search(r'<table class="cells sortable">(.*?)</table>', dom, re.S)
    assert cells, "no sortable cell table"
    # The page's script ran: it gave every header of a sortable table its hint.
    heads = re.findall(r"<th(?:\s[^>]*)?>", cells.group(1))
    assert heads and all('title="' in h and "click to sort" in h for h in heads), heads
    errors = [ln for ln in log.splitlines() if "CONSOLE" in ln and "Uncaught" in ln]
    assert not errors, errors
