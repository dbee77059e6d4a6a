"""perf.md and the end-of-sweep summary read in a terminal (issue 26): cells as columns where that
is narrower than cells as rows, what tells cell names apart kept at 60, 80 and 200 columns,
"not measured" where a cell has no value (never 0), and every list a collector publishes (top
CPU operators of a CPU torchprof sweep among them) in perf.md, once. Real sweeps, real CLI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cli_helpers import run_aorta
from rich.cells import cell_len

#: A payload that reports ``only_a_ms`` in cell ``a`` and fails in cell ``b``.
SCRIPT = ("import json, os, sys\n"
          "mode = os.environ['AORTA_TEST_MODE']\n"
          "metrics = {'only_a_ms': 1.5, 'both_s': 2.0} if mode.startswith('a') else {}\n"
          "json.dump(metrics, open(os.environ['AORTA_METRICS_PATH'], 'w'))\n"
          "sys.exit(0 if mode.startswith('a') else 1)\n")


def _table(text: str) -> list[list[str]]:
    """The first Markdown table of ``text``: its rows (header first, separator left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows


def _section(perf: str, heading: str) -> str:
    return perf.split(heading, 1)[1].split("\n#", 1)[0]


@pytest.fixture(scope="module")
def two_cells(tmp_path_factory) -> Path:
    """Two cells with long names that share their start: ``a...`` passes with two metrics, ``b...``
    fails and measures nothing."""
    root = tmp_path_factory.mktemp("two")
    out = root / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "+env.AORTA_SHARED_SETTING=on",
                      "+env.AORTA_TEST_MODE=a_first_long_value,b_second_long_value",
                      f"output={out}", "--", sys.executable, "-c", SCRIPT], cwd=root)
    assert done.returncode == 1, done.stderr  # cell b failed, as meant
    return out


def test_a_few_cells_are_columns_and_unmeasured_is_said(two_cells: Path):
    perf = (two_cells / "perf.md").read_text()
    rows = _table(perf)
    header, by_metric = rows[0], {r[0]: r[1:] for r in rows[1:]}
    assert header[0] == "metric" and len(header) == 3  # the two cells are the columns
    assert "first" in header[1] and "second" in header[2]
    assert by_metric["workload_only_a_ms"] == ["1.5", "not measured"]
    assert by_metric["workload_both_s"] == ["2", "not measured"]
    assert by_metric["wall_time_s"][1] == "not measured"
    assert by_metric["pass/fail/error"] == ["1/0/0", "0/1/0"]
    assert "| 0 |" not in perf and not re.search(r"\|\s+0\s+\|", perf)
    lines = [ln for ln in perf.splitlines() if ln.startswith("|")]
    assert len({cell_len(ln) for ln in lines}) == 1  # padded: the columns line up
    # Cells as rows would need a column per metric: wider than the table written.
    assert cell_len(lines[0]) < sum(len(m) + 3 for m in by_metric) + 1


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_the_summary_keeps_what_tells_cells_apart(two_cells: Path, columns: int):
    done = run_aorta(["matrix", str(two_cells)], cwd=two_cells.parent,
                     env={"COLUMNS": str(columns)})
    assert done.returncode == 0, done.stderr
    table = [ln for ln in done.stderr.splitlines() if ln[:1] in "┏┃┡│└"]
    assert table and all(cell_len(ln) <= columns for ln in table), done.stderr
    text = "".join(ln.replace("│", "").replace("┃", "").replace(" ", "") for ln in table)
    assert "first" in text and "second" in text, done.stderr
    assert "notmeasured" in text  # cell b's median wall time: no passing trial
    matrix = json.loads((two_cells / "matrix.json").read_text())
    full = [c["cell"] for c in matrix["cells"]]
    if max(map(len, full)) + 44 <= columns:  # the full names fit: shown whole, nothing cut
        assert all(name.replace(" ", "") in text for name in full)
        assert "shortened" not in done.stderr
    else:
        assert "cell names shortened to what tells them apart" in done.stderr


@pytest.fixture(scope="module")
def many_cells(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("many")
    out = root / "out"
    script = ("import json, os; json.dump({'x_ms': 1.0}, "
              "open(os.environ['AORTA_METRICS_PATH'], 'w'))")
    done = run_aorta(["-m", "sweep=repeat", "trials=1", f"+cell={','.join(map(str, range(12)))}",
                      f"output={out}", "--", sys.executable, "-c", script], cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_many_cells_with_few_metrics_stay_rows(many_cells: Path):
    rows = _table((many_cells / "perf.md").read_text())
    assert rows[0][:2] == ["cell", "cell"]  # the cell, then its axis
    assert "workload_x_ms" in rows[0]
    assert len(rows) == 13 and sorted(r[1] for r in rows[1:]) == sorted(map(str, range(12)))


@pytest.fixture(scope="module")
def torchprof_grid(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("grid")
    out = root / "out"
    done = run_aorta(["sweep=grid", "collector=torchprof", "trials=1", "workload.steps=3",
                      f"output={out}"], cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_a_cpu_torchprof_sweep_shows_its_top_operators_once(torchprof_grid: Path):
    perf = (torchprof_grid / "perf.md").read_text()
    matrix = json.loads((torchprof_grid / "matrix.json").read_text())
    ops = {c["cell"]: c["metrics_text"]["torchprof_top_cpu_ops"] for c in matrix["cells"]}
    assert all(ops.values()) and any(o.startswith("aten::") for v in ops.values() for o in v)
    rows = _table(_section(perf, "### `torchprof_top_cpu_ops`"))
    header, body = rows[0], rows[1:]
    # Cells as columns or as rows, whichever is narrower: that depends on the names of the ops
    # the run timed into its top lists, so either may come.
    if header[0] == "#":
        assert len(header) == 1 + len(ops)
        assert [r[0] for r in body] == [str(i + 1) for i in range(len(body))]
        per_cell = [[r[column] for r in body] for column in range(1, len(header))]
    else:
        assert header[0] == "cell" and len(body) == len(ops)
        assert header[1:] == [str(i + 1) for i in range(len(header) - 1)]
        per_cell = [r[1:] for r in body]
    for values, name in zip(per_cell, ops, strict=True):  # the names are in the cells' order
        assert values[:len(ops[name])] == ops[name]
    # The metrics table names no list: lists are tables of their own.
    assert "torchprof_top_cpu_ops" not in _section(perf, "# aorta sweep")
