"""Every string from a record, payload, axis value or edited matrix.json is data in the reports:
report.html gains no element, attribute, script or link out of the output from it, perf.md no
tag and no column, the console no Rich markup. CPU only: the payload is a ``python -c``."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from needs import NO_GPU
from reports.report_helpers import aorta
from reports.test_report_browser import _render

#: Markup, a script end, a comment start, JS line separators, a Markdown column and code span.
#: Each injected piece, if it ran, would set the page's title (what the browser check reads).
BAD = ('x"><img src=x onerror=document.title=1337><script>document.title="pwned"</script><!--'
       "\u2028\u2029|`y`\\")
AXIS = "<b onmouseover=alert(1)>[bold]bold[/bold] [/x]|`z`"
CELL = "[bold]c[/bold] [/y]<i>|"
#: Its numbers differ by trial, so that a figure of each (not the folded line of constants)
#: carries the hostile names too.
PAYLOAD = (f"import json, os; bad = {BAD!r}; t = int(os.environ['AORTA_TRIAL']); json.dump("
           "{'t' + bad + '_ms': 1.5 + t, 'step' + bad: 2.0 + t, 'note': bad, "
           "'names': [bad, bad + '2']}, open(os.environ['AORTA_METRICS_PATH'], 'w'))")
SAFE_ID = re.compile(r"[A-Za-z0-9_.-]+")


class _Page(HTMLParser):
    """Elements, attributes, script bodies and visible text of a page, as a browser parses it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def _hostile_sweep(root: Path) -> Path:
    """A real sweep whose payload reports hostile metric names and text values under a hostile
    axis value, then records edited as a user or collector could: a collector-shaped metric
    (the top-kernels section), a hostile error, a log name leading out of the output, a cell
    name (cell.json and its records) with Rich markup."""
    out = root / "hostile"
    done = aorta("sweep=repeat", "trials=2", f"output={out}", f"+env.X={json.dumps(AXIS)}",
                 "--", sys.executable, "-c", PAYLOAD, cwd=root, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    assert AXIS in done.stderr  # Rich markup in an axis value prints literally (cell line)
    for path in sorted(out.glob("cells/*/cell.json")):
        path.write_text(json.dumps({**json.loads(path.read_text()), "cell": CELL}))
    for path in sorted(out.glob("cells/*/trial_*/record.json")):
        record = json.loads(path.read_text())
        record["cell"] = CELL
        record["metrics"].update({f"t_{BAD}_top_kernel_ms": 1.0, f"t_{BAD}_gpu_time_ms": 2.0,
                                  f"t_{BAD}_top_kernels": [BAD, "ok_kernel"]})
        record["error"] = BAD
        record["stdout"] = "../" * 30 + "etc/passwd"
        path.write_text(json.dumps(record))
    done = aorta("matrix", str(out), cwd=root, env=NO_GPU)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert CELL in done.stderr and "bad record" not in done.stderr  # markup printed literally
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return _hostile_sweep(tmp_path_factory.mktemp("escaping"))


def _report(out: Path) -> tuple[str, _Page]:
    done = aorta("report", "sweep", str(out), cwd=out.parent)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    page = (out / "report.html").read_text()
    parsed = _Page()
    parsed.feed(page)
    return page, parsed


def _assert_inert(page: str, parsed: _Page, figures: int = 3) -> None:
    tags = [t for t, _ in parsed.tags]
    assert "img" not in tags and "b" not in tags
    for tag, attrs in parsed.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        if "id" in attrs:
            assert SAFE_ID.fullmatch(attrs["id"] or ""), attrs["id"]
        if "href" in attrs:
            href = attrs["href"] or ""
            assert ":" not in href and not href.startswith("/"), href
            assert ".." not in href.split("/"), href
    # Each script is aorta's own: plotly.js, its config, or one figure whose data (JSON) has
    # no "<" to end the script or open a comment, and no JS line separator.
    assert page.count("<script") == len(parsed.scripts) == page.count("</script>")
    plots = [s for s in parsed.scripts if "Plotly.newPlot(" in s]
    assert len(plots) == len(re.findall(r'class="plotly-graph-div"', page)) >= figures
    for body in plots:
        assert "<" not in body and "\u2028" not in body and "\u2029" not in body
    assert all("pwned" not in s for s in parsed.scripts if s not in plots)
    text = "".join(parsed.text)
    assert BAD.replace("\u2028\u2029", "") in text.replace("\u2028\u2029", "")
    assert CELL in text


def test_hostile_names_and_values_are_text_in_report_html(hostile):
    page, parsed = _report(hostile)
    _assert_inert(page, parsed)
    assert "[bold]bold[/bold] [/x]" in "".join(parsed.text)  # the axis value, as text
    assert "etc/passwd" in "".join(parsed.text)  # the log link out is shown as text
    # The collector-shaped list reached the section of lists, under its name, as text.
    assert f"(t_{BAD}_top_kernels)".replace("\u2028\u2029", "") in "".join(
        parsed.text).replace("\u2028\u2029", "")


def test_links_from_an_edited_matrix_stay_inside_the_output(hostile, tmp_path):
    matrix_path = hostile / "matrix.json"
    kept = matrix_path.read_text()
    try:
        matrix = json.loads(kept)
        matrix["cells"][0]["dir"] = "../../../etc"
        matrix["cells"].append({**matrix["cells"][0], "cell": "abs", "dir": "/etc"})
        matrix["cells"].append({**matrix["cells"][0], "cell": "js", "dir": "javascript:alert(1)"})
        matrix_path.write_text(json.dumps(matrix))
        page, parsed = _report(hostile)
        _assert_inert(page, parsed)
        hrefs = [a["href"] for _, a in parsed.tags if a.get("href")]
        assert not [h for h in hrefs if "etc" in h], hrefs
        assert "javascript%3Aalert%281%29" in hrefs  # relative: a folder so named inside output
    finally:
        matrix_path.write_text(kept)


def _columns(line: str) -> int:
    """Column separators of a Markdown table row: ``|`` not escaped by an odd backslash run."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line))


def test_perf_md_carries_no_tag_and_keeps_its_columns(hostile):
    perf = (hostile / "perf.md").read_text()
    assert "<" not in perf and "\u2028" not in perf and "\u2029" not in perf
    table = perf.split("\n\n")[2].splitlines()  # the cells' table: one cell, so a column
    assert table[0].startswith("| metric ") and len(table) > 3
    assert {_columns(r) for r in table} == {3}  # | metric | the cell |: no column from data
    assert "&lt;img src=x onerror=document.title=1337&gt;" in perf


def test_compare_of_hostile_sweeps_is_inert(hostile, tmp_path):
    html_path = tmp_path / "compare.html"
    done = aorta("compare", str(hostile), str(hostile), "--html", str(html_path), "--no-png",
                 cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("|")]
    assert len(rows) > 3 and len({_columns(r) for r in rows}) == 1, done.stdout
    assert "<" not in done.stdout and "&lt;img src=x onerror=document.title=1337&gt;" in done.stdout
    page = html_path.read_text()
    parsed = _Page()
    parsed.feed(page)
    _assert_inert(page, parsed, figures=1)


def test_no_injected_script_runs_in_chromium(browser, hostile, tmp_path):
    _report(hostile)
    dom, log = _render(browser, hostile / "report.html", tmp_path / "profile")
    assert "js-plotly-plot" in dom  # the page's own scripts ran
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title and title.group(1) == "aorta sweep report — hostile", title
    assert "<img" not in dom and "<b " not in dom
    errors = [ln for ln in log.splitlines() if "CONSOLE" in ln and "Uncaught" in ln]
    assert not errors, errors


@pytest.fixture(scope="module")
def hostile_failure(tmp_path_factory) -> Path:
    """A real sweep whose payload fails saying :data:`BAD` (its line separators left out: they
    end a line of stderr), its record then edited to hold all of it, a log name leading out of
    the output, and the cell named :data:`CELL`."""
    root = tmp_path_factory.mktemp("failing")
    out = root / "failing"
    said = BAD.replace("\u2028\u2029", "")
    done = aorta("sweep=repeat", "trials=1", f"output={out}", f"+env.X={json.dumps(AXIS)}",
                 "--", sys.executable, "-c", f"raise SystemExit({said!r})", cwd=root, env=NO_GPU)
    assert done.returncode == 1, done.stderr
    (record_path,) = out.glob("cells/*/trial_000/record.json")
    record = json.loads(record_path.read_text())
    assert record["error"] == f"exit code 1: {said}"
    record_path.write_text(json.dumps({**record, "cell": CELL, "error": BAD,
                                       "stderr": "../" * 30 + "etc/passwd"}))
    cell_path = record_path.parents[1] / "cell.json"
    cell_path.write_text(json.dumps({**json.loads(cell_path.read_text()), "cell": CELL}))
    done = aorta("matrix", str(out), cwd=root, env=NO_GPU)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return out


def test_what_went_wrong_is_text_in_both_reports(hostile_failure):
    out = hostile_failure
    page, parsed = _report(out)
    assert not {t for t, _ in parsed.tags} & {"img", "b", "i"}
    for _, attrs in parsed.tags:
        assert not [a for a in attrs if a.startswith("on")], attrs
        assert "etc" not in (attrs.get("href") or ""), attrs
    assert all("pwned" not in s for s in parsed.scripts)
    failures = page.split("<section id=failures>", 1)[1].split("</section>", 1)[0]
    shown = _Page()
    shown.feed(failures)
    text = "".join(shown.text)
    assert CELL in text and " ".join(BAD.split()) in text  # as one line
    assert failures.count("<a ") == 1 and "trial_000/record.json" in failures
    perf = (out / "perf.md").read_text()
    assert "<" not in perf and "\u2028" not in perf and "\u2029" not in perf
    (bullet,) = [line for line in perf.splitlines() if line.startswith("- ")]
    assert "&lt;img src=x onerror=document.title=1337&gt;" in bullet
    assert "etc/passwd" not in bullet and bullet.endswith("trial_000/record.json`)")


def test_what_went_wrong_reads_no_records_from_outside_the_output(hostile_failure):
    """matrix.json edited so that the failed cell's folder leads out of the output: its
    records are not read (the trial is counted as not read), nothing links out."""
    matrix_path = hostile_failure / "matrix.json"
    kept = matrix_path.read_text()
    try:
        matrix = json.loads(kept)
        matrix["cells"][0]["dir"] = "cells/../../" + hostile_failure.name
        matrix_path.write_text(json.dumps(matrix))
        page, _ = _report(hostile_failure)
        failures = page.split("<section id=failures>", 1)[1].split("</section>", 1)[0]
        assert "<a " not in failures
        assert ("1 failed trial(s) not read for their reason: each trial&#x27;s record.json "
                "has it (the Trials table below links them).") in failures
    finally:
        matrix_path.write_text(kept)
