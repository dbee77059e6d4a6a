"""A metric named like one of the matrix's own columns (``cell``, ``trial``, ``verdict``,
``wall_time_s``, ``axis:<name>``, the long form's ``metric``/``value``/``text``) is left out of
that record's metrics with one warning per name; the matrix, perf.md and report.html are
written as usual. CPU only: the payloads are ``python -c`` one-liners."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
from cli_helpers import run_aorta
from needs import NO_GPU

#: A collector named ``wall`` may publish ``wall_time_s`` (its prefix is ``wall_``).
WALL_COLLECTOR = '''
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="publishes wall_time_s", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    return {"wall_time_s": 1234.5, "wall_ms": 7.0}
'''

PAYLOAD = ("import json, os; json.dump({'step_ms': 3.0}, "
           "open(os.environ['AORTA_METRICS_PATH'], 'w'))")
COLLIDING = ("cell", "trial", "verdict", "wall_time_s", "axis:trials", "metric", "value", "text")


def _warnings(stderr: str, name: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if f"metric {name!r} of " in ln]


def _assert_written(out: Path) -> dict:
    for name in ("matrix.json", "matrix.parquet", "perf.md", "report.html"):
        assert (out / name).is_file(), name
    return json.loads((out / "matrix.json").read_text())


def test_a_collector_publishing_wall_time_s_keeps_the_trials_own(tmp_path, plugin_site):
    plugin_site.add("wall", WALL_COLLECTOR)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", "collector=wall", f"output={out}", "--",
                      sys.executable, "-c", PAYLOAD], cwd=tmp_path,
                     env={**plugin_site.env, **NO_GPU})
    assert done.returncode == 0, done.stderr
    lines = _warnings(done.stdout + done.stderr, "wall_time_s")
    assert len(lines) == 1, done.stdout + done.stderr
    assert "cells/" in lines[0] and "record.json" in lines[0] and "rename it" in lines[0]
    assert "1 other record" in lines[0]
    cell = _assert_written(out)["cells"][0]
    assert cell["wall_time_s"]["max"] < 1000  # the trial's own wall time, not the metric
    assert cell["metrics_summary"]["wall_ms"]["median"] == 7.0
    assert cell["metrics_summary"]["workload_step_ms"]["median"] == 3.0


def test_edited_records_with_reserved_names_are_named_and_the_matrix_is_built(tmp_path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", f"output={out}", "--", sys.executable, "-c",
                      PAYLOAD], cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    paths = sorted(out.glob("cells/*/trial_*/record.json"))
    for path in paths:
        record = json.loads(path.read_text())
        record["metrics"].update({name: 99.0 for name in COLLIDING})
        record["metrics"]["verdict"] = "fail"  # text, as a record could carry
        path.write_text(json.dumps(record))
    done = run_aorta(["matrix", str(out)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert "Traceback" not in text
    first = paths[0].relative_to(out).as_posix()
    for name in COLLIDING:
        lines = _warnings(text, name)
        assert len(lines) == 1, (name, text)
        assert first in lines[0] and "collides with the matrix's own column" in lines[0]
    matrix = _assert_written(out)
    cell = matrix["cells"][0]
    assert cell["trials"] == {"total": 2, "pass": 2, "fail": 0, "error": 0}
    assert set(cell["metrics_summary"]) == {"workload_step_ms"}
    long = pl.read_parquet(out / "matrix.parquet")
    assert set(long["metric"]) == {"wall_time_s", "workload_step_ms"}
    assert set(long["verdict"]) == {"pass"}
    assert long.filter(pl.col("metric") == "wall_time_s")["value"].max() < 99.0
    done = run_aorta(["report", "sweep", str(out)], cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_names_of_the_matrix_s_working_columns_are_plain_metrics(tmp_path):
    """``row``, ``kind``, ``at``, ``alone`` name columns the matrix only uses while building
    (never in its files): metrics so named are kept like any other, with no warning."""
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", f"output={out}", "--", sys.executable, "-c",
                      PAYLOAD], cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    for path in out.glob("cells/*/trial_*/record.json"):
        record = json.loads(path.read_text())
        record["metrics"].update({"row": 1.5, "at": 2.0, "alone": 3.0, "kind": "k"})
        path.write_text(json.dumps(record))
    done = run_aorta(["matrix", str(out)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "collides" not in done.stderr
    cell = _assert_written(out)["cells"][0]
    assert set(cell["metrics_summary"]) == {"workload_step_ms", "row", "at", "alone"}
    assert cell["metrics_summary"]["row"]["median"] == 1.5 and cell["metrics_text"]["kind"] == "k"
