"""Reports of failed runs lead with why (issue #41, point 8): report.html and perf.md open with
what went wrong, per reason its cells, their trials and the file to read, before any comparison;
a run where nothing passed has no headline at all. Real sweeps through the CLI, CPU only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from needs import NO_GPU, needs
from reports.page_tables import read_page
from reports.report_helpers import aorta

BOOM = "raise SystemExit('boom')"
#: Fails in the cells whose X is b, passes elsewhere.
FAILS_ON_B = "import os, sys; sys.exit('bad ' + os.environ['X']) if os.environ['X'] == 'b' else 0"


def _sweep(root: Path, *args: str, status: int = 1) -> Path:
    out = root / "out"
    done = aorta(f"output={out}", "sweep=repeat", *args, cwd=root, env=NO_GPU)
    assert done.returncode == status, done.stderr
    return out


def _records(out: Path, cell: str) -> list[dict]:
    return [json.loads(p.read_text())
            for p in sorted(out.glob(f"cells/{cell}/trial_*/record.json"))]


def _failure_rows(out: Path) -> list[list[str]]:
    """The rows of report.html's first table, which must be "What went wrong"'s."""
    page = read_page(out / "report.html")
    first = page.tables[0]
    assert (first.section, first.heading) == ("failures", "What went wrong")
    assert [h.text for h in first.header] == ["cells", "trials", "why", "read next"]
    return [[c.text for c in row] for row in first.rows]


def _perf_lead(out: Path) -> list[str]:
    """perf.md's lines from its title down to the cells' table."""
    lines = (out / "perf.md").read_text().splitlines()
    return lines[:next(i for i, line in enumerate(lines) if line.startswith("| "))]


@pytest.fixture(scope="module")
def boom(tmp_path_factory) -> Path:
    return _sweep(tmp_path_factory.mktemp("boom"), "trials=2", "--", sys.executable, "-c", BOOM)


def test_a_run_whose_every_trial_failed_opens_with_why_and_has_no_headline(boom):
    error = {r["error"] for r in _records(boom, "default")}
    assert error == {"exit code 1: boom"}  # what the payload said, as the record keeps it
    log = "cells/default/trial_000/stderr.log"
    assert (boom / log).is_file()
    assert _failure_rows(boom) == [["default", "2 fail of 2 trials", "exit code 1: boom", log]]
    page = read_page(boom / "report.html")
    assert page.paragraphs[1] == ("failures", "Nothing passed: 2 of 2 trials failed. There is "
                                  "nothing to compare; why, with the file to read:")
    assert "headline" not in {t.section for t in page.tables}
    text = (boom / "report.html").read_text()
    assert "nothing to compare it with" not in text and "<h2>Headline</h2>" not in text
    assert f'<a href="{log}">{log}</a>' in text  # relative: the page opens it beside itself
    assert _perf_lead(boom) == [
        f"# aorta sweep: {boom}", "",
        "**What went wrong.** Nothing passed: 2 of 2 trials failed. There is nothing to "
        "compare; why, with the file to read:", "",
        f"- `default`: exit code 1: boom (2 fail of 2 trials; see `{log}`)", "",
        "2 trials in 1 cells: 0 pass, 2 fail, 0 error. Values are medians over passing trials "
        "(± sample std when n > 1); full statistics in matrix.json. Not measured: no passing "
        "trial of the cell reported it.", ""]


def test_a_run_with_some_failures_shows_them_first_then_the_comparison(tmp_path):
    out = _sweep(tmp_path, "trials=1", "+env.X=a,b", "--", sys.executable, "-c", FAILS_ON_B)
    (record,) = _records(out, "env.X=b")
    assert _failure_rows(out) == [["env.X=b", "1 fail of 1 trial", record["error"],
                                   "cells/env.X=b/trial_000/stderr.log"]]
    page = read_page(out / "report.html")
    sections = [t.section for t in page.tables]
    assert sections.index("failures") < sections.index("headline")
    assert ("failures", "1 of 2 trials failed. What follows compares the 1 passing trial(s) "
            "only; why the others failed, with the file to read:") in page.paragraphs
    lead = _perf_lead(out)
    assert lead[2].startswith("**What went wrong.** 1 of 2 trials failed. What follows")
    assert lead[4] == (f"- `env.X=b`: {record['error']} (1 fail of 1 trial; see "
                       "`cells/env.X=b/trial_000/stderr.log`)")


@needs("aorta_torchprof")
def test_cells_that_share_a_reason_share_a_row(tmp_path):
    """Two cells refused for one option value, two whose trials errored for one reason: a row
    each reason, both cells in it, the refused ones pointing at the cell.json that says why."""
    out = _sweep(tmp_path, "trials=2", "collector=torchprof", "collector.torchprof.active=0,2",
                 "+env.X=a,b", "--", sys.executable, "-c", "pass")
    matrix = json.loads((out / "matrix.json").read_text())
    refused = [c for c in matrix["cells"] if c["error"]]
    errored = [c for c in matrix["cells"] if not c["error"]]
    assert len(refused) == len(errored) == 2
    (reason,) = {c["error"] for c in refused}
    (error,) = {r["error"] for c in errored for r in _records(out, c["cell"])}
    assert _failure_rows(out) == [
        [", ".join(c["cell"] for c in refused), "could not run", reason,
         f"{refused[0]['dir']}/cell.json"],
        [", ".join(c["cell"] for c in errored), "4 error of 4 trials", error,
         f"{errored[0]['dir']}/trial_000/record.json"]]  # no payload ran: no stderr.log
    lead = _perf_lead(out)
    assert lead[2] == ("**What went wrong.** Nothing passed: 4 of 4 trials errored; 2 cell(s) "
                       "could not run. There is nothing to compare; why, with the file to read:")
    assert lead[4].startswith(f"- `{refused[0]['cell']}`, `{refused[1]['cell']}`: ")
    assert "Cells that could not run" not in (out / "perf.md").read_text()  # said once, first


def test_many_reasons_and_cells_are_counted_past_what_is_listed(tmp_path):
    """27 cells: the first six fail alike (one row naming five and counting the sixth), the
    others each in their own words (21 more reasons: twenty rows in all, two counted)."""
    fails = ("import os, sys; x = int(os.environ['X']); "
             "sys.exit('same' if x <= 6 else f'bad {x}')")
    out = _sweep(tmp_path, "trials=1", "+env.X=" + ",".join(map(str, range(1, 28))), "--",
                 sys.executable, "-c", fails)
    rows = _failure_rows(out)
    assert len(rows) == 20
    assert rows[0][:3] == ["env.X=1, env.X=2, env.X=3, env.X=4, env.X=5 and 1 more",
                           "6 fail of 6 trials", "exit code 1: same"]
    assert len({row[2] for row in rows}) == 20
    page = read_page(out / "report.html")
    assert ("failures", "2 more reason(s): each trial's record.json has its own (the Trials "
            "table below links them).") in page.paragraphs
    lead = _perf_lead(out)
    assert lead[4].startswith("- `env.X=1`, `env.X=2`, `env.X=3`, `env.X=4`, `env.X=5` and 1 "
                              "more: exit code 1: same (6 fail of 6 trials; see ")
    bullets = [line for line in lead if line.startswith("- ")]
    assert len(bullets) == 21 and bullets[-1] == ("- 2 more reason(s): each trial's record.json "
                                                  "has its own")


def test_a_record_the_matrix_cannot_use_is_not_counted_again_as_a_failure(tmp_path):
    """What went wrong reads only how each trial ended (not its metrics): a failed trial whose
    record the matrix refused (its metrics damaged) is the matrix's bad record, not a reason."""
    out = _sweep(tmp_path, "trials=2", "--", sys.executable, "-c", BOOM)
    damaged = out / "cells/default/trial_001/record.json"
    record = json.loads(damaged.read_text())
    damaged.write_text(json.dumps({**record, "metrics": "x", "error": "damaged"}))
    assert aorta("matrix", str(out), cwd=tmp_path, env=NO_GPU).returncode == 0
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["unreadable_records"] == ["cells/default/trial_001/record.json"]
    rows = _failure_rows(out)  # the refused record's trial is one to run again, as a missing one
    assert [row[1:3] for row in rows] == [
        ["1 not recorded of 2 trials", "not recorded: the sweep or its job ended before them; run "
         "the same command again to run them"],
        ["1 fail of 1 trial", record["error"]]], rows
    assert "damaged" not in (out / "perf.md").read_text()
