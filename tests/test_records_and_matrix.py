"""Records on disk and the matrix computed from them."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl
import pytest

from aorta_core.engine.cells import cell_name
from aorta_core.engine.matrix import build
from aorta_core.engine.records import (
    SCHEMA_VERSION,
    BadRecord,
    TrialRecord,
    load_record,
    write_json_atomic,
    write_record,
)


def _record(cell: str, trial: int, verdict: str, metrics: dict, wall: float) -> dict:
    return {"schema_version": SCHEMA_VERSION, "cell": cell, "axes": {"size": cell[-1]},
            "trial": trial, "verdict": verdict, "wall_time_s": wall, "metrics": metrics,
            "environment": {"host": "h", "gpus": [], "packages": {}, "python": "3.11"}}


def _write(output: Path, rec: dict) -> None:
    folder = output / "cells" / rec["cell"] / f"trial_{rec['trial']:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / "record.json", rec)


def test_records_round_trip_and_bad_ones_are_named(tmp_path: Path):
    path = tmp_path / "trial_000" / "record.json"
    path.parent.mkdir()
    record = TrialRecord(cell="c", trial=0, verdict="pass", wall_time_s=1.5,
                         metrics={"x_ms": 2.0, "x_top_kernels": ["k"], "x_n": 3})
    write_record(path, record)
    assert load_record(path, "c", 0) == record
    assert list(path.parent.iterdir()) == [path]
    for text, reason in [('{"schema_version": 1, "verd', "truncated"),
                         ("[1, 2]", "Expected `object`, got `array`"),
                         ('{"cell": "c", "trial": 0, "verdict": "maybe"}', "Invalid enum value"),
                         ('{"cell": "c", "trial": 0, "verdict": "pass", "metrics": [1]}',
                          "Expected `object`, got `array` - at `$.metrics`")]:
        path.write_text(text)
        with pytest.raises(BadRecord) as bad:
            load_record(path, "c", 0)
        assert str(bad.value).startswith(f"{path}: ") and reason in str(bad.value)
    write_record(path, record)
    with pytest.raises(BadRecord, match="names cell 'c', not 'd'"):
        load_record(path, "d", 0)
    with pytest.raises(BadRecord, match="names trial 0, not 1"):
        load_record(path, "c", 1)
    with pytest.raises(FileNotFoundError):
        load_record(tmp_path / "missing.json")


def test_matrix_statistics_cover_passing_trials_only(tmp_path: Path):
    times = {"s=1": [1.0, 2.0, 4.0], "s=2": [10.0, 30.0]}
    for cell, values in times.items():
        for i, v in enumerate(values):
            _write(tmp_path, _record(cell, i, "pass", {"x_gpu_time_ms": v, "x_top_kernels": ["k"],
                                                       "x_artifact_dir": "/a"}, wall=v / 10))
    _write(tmp_path, _record("s=1", 3, "fail", {"x_gpu_time_ms": 999.0}, wall=9.0))
    _write(tmp_path, _record("s=2", 2, "error", {}, wall=0.1))
    result = build(tmp_path)
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    assert [c["cell"] for c in matrix["cells"]] == ["s=1", "s=2"]
    one, two = matrix["cells"]
    assert one["trials"] == {"total": 4, "pass": 3, "fail": 1, "error": 0}
    assert two["trials"] == {"total": 3, "pass": 2, "fail": 0, "error": 1}
    for cell, values in zip((one, two), times.values(), strict=True):
        stats = cell["metrics_summary"]["x_gpu_time_ms"]
        assert stats["mean"] == pytest.approx(statistics.mean(values))
        assert stats["median"] == pytest.approx(statistics.median(values))
        assert stats["std"] == pytest.approx(statistics.stdev(values))
        assert (stats["min"], stats["max"], stats["n"]) == (min(values), max(values), len(values))
        assert cell["wall_time_s"]["n"] == len(values)
        assert cell["metrics_text"] == {"x_top_kernels": ["k"]}
    assert matrix["trials"] == {"total": 7, "pass": 5, "fail": 1, "error": 1}
    long = pl.read_parquet(tmp_path / "matrix.parquet")
    assert set(long.columns) == {"axis:size", "cell", "trial", "verdict", "metric", "value", "text"}
    fail_row = long.filter((pl.col("verdict") == "fail") & (pl.col("metric") == "x_gpu_time_ms"))
    assert fail_row["value"].to_list() == [999.0]
    assert long.filter(pl.col("metric") == "x_top_kernels")["text"][0] == '["k"]'
    perf = (tmp_path / "perf.md").read_text()
    rows = {r.split("|")[1].strip(): r.split("|")[2:4] for r in perf.splitlines()
            if r.startswith("| ")}  # two cells: the cells are the columns
    assert [v.strip() for v in rows["metric"]] == ["s=1", "s=2"]
    assert [v.strip() for v in rows["pass/fail/error"]] == ["3/1/0", "2/0/1"]
    assert "2 ±1.528" in rows["x_gpu_time_ms"][0] + rows["x_gpu_time_ms"][1]
    assert result.paths[0] == tmp_path / "matrix.json"


def test_matrix_of_a_cell_that_could_not_run(tmp_path: Path):
    (tmp_path / "cells" / "c").mkdir(parents=True)
    (tmp_path / "cells" / "c" / "cell.json").write_text(json.dumps({"cell": "c", "error": "bad"}))
    build(tmp_path)
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    assert matrix["cells"][0]["error"] == "bad"
    assert matrix["cells"][0]["trials"]["total"] == 0
    assert "- `c`: bad" in (tmp_path / "perf.md").read_text()


def test_cell_names_are_folder_safe_and_stable():
    assert cell_name("") == "default"
    assert cell_name("a=1,b=x") == "a=1,b=x"
    odd = cell_name("collector=[a,b],cmd=x/y z")
    assert "/" not in odd and " " not in odd and "[" not in odd
    assert odd == cell_name("collector=[a,b],cmd=x/y z")
    assert odd != cell_name("collector=[a,b],cmd=x/y_z")
    assert len(cell_name("k=" + "v" * 500)) <= 110


def test_a_metric_whose_type_changes_between_trials_becomes_text(tmp_path: Path):
    _write(tmp_path, _record("s=1", 0, "pass", {"x_a": 1.0, "x_flag": True, "x_b": 2}, wall=1))
    _write(tmp_path, _record("s=1", 1, "pass", {"x_a": ["odd"], "x_flag": 3, "x_b": 4}, wall=1))
    build(tmp_path)
    cell = json.loads((tmp_path / "matrix.json").read_text())["cells"][0]
    assert cell["metrics_summary"]["x_b"]["mean"] == 3
    assert "x_a" not in cell["metrics_summary"]
    long = pl.read_parquet(tmp_path / "matrix.parquet")
    texts = long.filter(pl.col("metric") == "x_a")["text"].to_list()
    assert len(texts) == 2 and '["odd"]' in texts


def test_trials_with_different_metric_sets_keep_their_own_values(tmp_path: Path):
    """Rows are grouped by their metric names to build the columns; each value must still land
    on its own trial's row."""
    shapes = [("x_a", "x_b"), ("x_b",), (), ("x_b", "x_a"), ("x_a", "x_b", "x_c"), ("x_a",)]
    for trial, keys in enumerate(shapes * 2):
        metrics = {k: float(100 * trial + i) for i, k in enumerate(keys)}
        _write(tmp_path, _record("s=1", trial, "pass", metrics, wall=trial))
    build(tmp_path)
    long = pl.read_parquet(tmp_path / "matrix.parquet").filter(pl.col("metric") != "wall_time_s")
    seen = {(row["trial"], row["metric"]): row["value"] for row in long.iter_rows(named=True)}
    expected = {(trial, k): float(100 * trial + i) for trial, keys in enumerate(shapes * 2)
                for i, k in enumerate(keys)}
    assert seen == expected


def test_metric_columns_keep_each_metrics_type(tmp_path: Path):
    """Each metric is one typed column: numbers are summarised (ints mixed with floats too),
    bools and text stay what they are, lists of text come back as lists — also when the first
    trial lacks the metric."""
    _write(tmp_path, _record("s=1", 0, "pass",
                             {"x_n": 3, "x_mix": 1, "x_on": True, "x_name": "a"}, wall=1))
    _write(tmp_path, _record("s=1", 1, "pass", {"x_n": 5, "x_mix": 2.5, "x_on": False,
                                                "x_name": "b", "x_top_kernels": ["k1", "k2"]},
                             wall=2))
    _write(tmp_path, _record("s=2", 0, "pass", {"x_top_kernels": ["k3"]}, wall=1))
    build(tmp_path)
    s1, s2 = json.loads((tmp_path / "matrix.json").read_text())["cells"]
    assert s1["metrics_summary"]["x_n"]["max"] == 5
    assert s1["metrics_summary"]["x_mix"]["mean"] == 1.75
    assert s1["metrics_text"] == {"x_on": True, "x_name": "a"}
    assert s2["metrics_text"] == {"x_top_kernels": ["k3"]}
    long = pl.read_parquet(tmp_path / "matrix.parquet")
    texts = long.filter(pl.col("metric") == "x_top_kernels").sort("cell")["text"].to_list()
    assert [json.loads(t) for t in texts] == [["k1", "k2"], ["k3"]]
