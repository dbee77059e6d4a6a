"""Every generated page opened in headless Chromium from a file:// URL: every plotly figure
renders (its div gets plotly's classes and an SVG) and no JavaScript error is logged."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from reports.report_helpers import FIXTURES, aorta

from aorta_core.reports.sweep import write_sweep_report


def _render(browser: str, page: Path, profile: Path) -> tuple[str, str]:
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=90)
    return done.stdout, done.stderr


def _check(browser: str, page: Path, tmp_path: Path) -> None:
    ids = re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page.read_text())
    assert ids, f"{page} has no figure"
    dom, log = _render(browser, page, tmp_path / f"profile-{page.stem}")
    for div in ids:
        match = re.search(rf'<div id="{re.escape(div)}" class="([^"]*)"', dom)
        assert match and "js-plotly-plot" in match.group(1), f"{div} not rendered in {page}"
    assert dom.count('class="main-svg"') >= len(ids)
    errors = [ln for ln in log.splitlines() if "CONSOLE" in ln
              and ("Uncaught" in ln or "Error" in ln)]
    assert not errors, errors


def test_pages_render_in_chromium(browser, sweeps, proton_sweep, tmp_path):
    upstream = FIXTURES / "upstream_shaped"
    aorta("report", "overlap", "--log-dir", str(upstream / "ddp"), "--label", "ddp",
          "--log-dir", str(upstream / "fsdp"), "--label", "fsdp", "--output",
          str(tmp_path / "overlap"), "--no-png", cwd=tmp_path)
    aorta("compare", str(sweeps["fast"]), str(sweeps["slow"]), "--html",
          str(tmp_path / "compare.html"), "--no-png", cwd=tmp_path)
    pages = [tmp_path / "overlap/report.html", tmp_path / "compare.html",
             write_sweep_report(proton_sweep, pngs=False)]
    for page in pages:
        _check(browser, page, tmp_path)


def test_the_check_catches_a_broken_page(browser, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><html><body><div id="f" class="plotly-graph-div"></div>'
                    "<script>Plotly.newPlot('f', [])</script></body></html>")
    dom, log = _render(browser, page, tmp_path / "profile")
    assert "Uncaught ReferenceError: Plotly is not defined" in log
    assert "js-plotly-plot" not in dom
