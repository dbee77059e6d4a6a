"""Sections that collectors add to report.html and perf.md (``report_sections``), installed as
real distributions and run through the real CLI. Any machine: the workload is ``true``."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import good_collector, run_aorta
from test_plugins import ONLY_TEST_PLUGINS

from aorta_core.engine.collector_sections import MAX_ROWS

SECTIONS = '''
from aorta_core import ReportSection

@hookimpl
def report_sections(matrix, output_dir):
    (output_dir / "{name}.asked").write_text(str(len(matrix["cells"])))
    return {sections}
'''


def _install(site, name: str, sections: str) -> None:
    site.add(name, good_collector(name) + SECTIONS.format(name=name, sections=sections))


def _sweep(site, tmp_path: Path, *collectors: str):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"collector=[{','.join(collectors)}]",
                      f"output={out}", "--", "true"], cwd=tmp_path,
                     env={**site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    return done, out


def test_a_section_reaches_both_reports_as_text_never_markup(plugin_site, tmp_path):
    rows = [[f"<b>row {i}</b>", i * 0.5, None] for i in range(MAX_ROWS + 3)]
    _install(plugin_site, "tape", f'[ReportSection("Tape | <i>speed</i>", text="Rewinds.\\n'
             f'Then <script>alert(1)</script> plays.", columns=["name", "ms", "note"], '
             f'rows={rows!r})]')
    plugin_site.add("idle", good_collector("idle") + SECTIONS.format(name="idle", sections="[]"))
    _, out = _sweep(plugin_site, tmp_path, "tape")
    assert (out / "tape.asked").read_text() == "1"
    assert not (out / "idle.asked").exists()  # installed, not in the sweep: not asked
    perf = (out / "perf.md").read_text()
    assert "\n## Tape \\| &lt;i&gt;speed&lt;/i&gt; (tape)\n\nRewinds.\n\n" in perf
    assert "Then &lt;script&gt;alert(1)&lt;/script&gt; plays." in perf
    first, widest = "&lt;b&gt;row 0&lt;/b&gt;", len(f"&lt;b&gt;row {MAX_ROWS - 1}&lt;/b&gt;")
    assert (f"| {'name'.ljust(widest)} |   ms | note |\n| {'-' * widest} | ---: | ---- |\n"
            f"| {first.ljust(widest)} |    0 |      |\n") in perf  # padded to line up
    assert "\n3 more row(s) not shown.\n" in perf and f"row {MAX_ROWS - 1}" in perf
    assert f"row {MAX_ROWS}<" not in perf and f"row {MAX_ROWS}&" not in perf
    page = (out / "report.html").read_text()
    assert "<h2>Tape | &lt;i&gt;speed&lt;/i&gt; (tape)</h2>" in page
    assert "<script>alert(1)</script>" not in page and "&lt;b&gt;row 0&lt;/b&gt;" in page
    assert "3 more row(s) not shown." in page


def test_a_broken_section_costs_its_sections_and_one_warning(plugin_site, tmp_path):
    _install(plugin_site, "crash", "1 / 0")
    _install(plugin_site, "junk", '"a section"')
    _install(plugin_site, "ragged", '[ReportSection("R", columns=["a", "b"], rows=[[1]])]')
    _install(plugin_site, "fine", '[ReportSection("Fine", text="all good")]')
    done, out = _sweep(plugin_site, tmp_path, "crash", "junk", "ragged", "fine")
    warned = [" ".join(line.split()) for line in done.stderr.splitlines()
              if "report_sections" in line]
    assert warned == 2 * [  # perf.md and report.html each ask
        "aorta: warning: collector crash: report_sections failed (ZeroDivisionError: division "
        "by zero); its report sections are left out",
        "aorta: warning: collector junk: report_sections failed (TypeError: returned str, not a "
        "list of ReportSection); its report sections are left out",
        "aorta: warning: collector ragged: report_sections failed (TypeError: section 'R': row 0 "
        "has 1 values for 2 columns); its report sections are left out"]
    assert "## Fine (fine)\n\nall good\n" in (out / "perf.md").read_text()
    assert "<h2>Fine (fine)</h2>" in (out / "report.html").read_text()
