"""The matrix of records with many metric names, most of them in one trial only (the layout
built value by value, summaries listed): every value lands on its own trial and metric, the
statistics are those of the values written, perf.md counts the metrics instead of one column
each. CPU only and no payload: the records are written here and ``aorta matrix`` reads them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import run_aorta
from needs import NO_GPU

from aorta_core.engine.matrix_long import CHUNK_VALUES
from aorta_core.engine.records import SCHEMA_VERSION, write_json_atomic

CELLS, TRIALS, NAMES, SHARED = 10, 5, 400, 40
VERDICTS = ("pass", "pass", "fail", "pass", "error")


def _metrics(rnd: random.Random, index: int, trial: int, records: int) -> dict:
    """NAMES metrics: SHARED names every trial has (floats, ints, ints mixed with floats, a
    bool, a list, a metric whose type changes from trial to trial, an int that turns to text in
    the last records only), the rest this record's own (numbers, text)."""
    metrics: dict = {f"shared_f{k}": rnd.uniform(-1e3, 1e3) for k in range(SHARED - 7)}
    metrics |= {"shared_int": rnd.randint(-10**9, 10**9),
                "shared_mix": rnd.randint(0, 9) if trial % 2 else rnd.random(),
                "shared_flag": trial % 2 == 0, "shared_kernels": [f"k{trial}", "gemm<1>"],
                "shared_changes": "text|x" if trial % 2 else 7.5,
                "shared_late": "late" if index >= records - 3 else rnd.randint(-10**12, 10**12),
                "shared_artifact_dir": f"/runs/{index}"}
    own = NAMES - len(metrics)
    metrics |= {f"r{index}_{k}": rnd.expovariate(1e-3) for k in range(own - 10)}
    metrics |= {f"r{index}_t{k}": f"kernel {rnd.randint(0, 99)}" for k in range(10)}
    return metrics


def _write(output: Path, cells: int) -> list[dict]:
    rnd = random.Random(23)
    written = []
    for index in range(cells * TRIALS):
        cell, trial = f"c={index // TRIALS}", index % TRIALS
        record = {"schema_version": SCHEMA_VERSION, "cell": cell, "axes": {"c": cell[2:]},
                  "trial": trial, "verdict": VERDICTS[trial], "wall_time_s": rnd.random(),
                  "metrics": _metrics(rnd, index, trial, cells * TRIALS),
                  "environment": {"host": "h", "gpus": [], "packages": {}, "python": "3.11"}}
        folder = output / "cells" / cell / f"trial_{trial:03d}"
        folder.mkdir(parents=True)
        write_json_atomic(folder / "record.json", record)
        written.append(record)
    return written


def _types(record: dict) -> dict:
    return {k: type(v) for k, v in record["metrics"].items()}


def _expected_long(records: list[dict]) -> tuple[dict, dict, dict]:
    """(value by (cell, trial, metric) for numbers, text by the same for the rest, the types of
    each metric), by the matrix's rules: a metric of numbers alone is a number; one whose type
    changes is JSON."""
    kinds: dict[str, set] = {}
    for record in records:
        for name, kind in _types(record).items():
            kinds.setdefault(name, set()).add(kind)
    values, texts = {}, {}
    for r in records:
        values[(r["cell"], r["trial"], "wall_time_s")] = r["wall_time_s"]
        for name, v in r["metrics"].items():
            key = (r["cell"], r["trial"], name)
            if kinds[name] <= {int, float}:
                values[key] = float(v)
            elif len(kinds[name]) > 1 or isinstance(v, list):
                texts[key] = json.dumps(v, separators=(",", ":"))
            else:
                texts[key] = str(v).lower() if isinstance(v, bool) else v
    return values, texts, kinds


@pytest.mark.parametrize("cells", [CELLS, 8 * CELLS], ids=["at-once", "in-chunks"])
def test_many_sparse_names_every_value_and_statistic(tmp_path: Path, cells: int):
    """Also with more values than the matrix turns into columns at a time (``CHUNK_VALUES``): a
    metric's type then changes in a later chunk than the first."""
    out = tmp_path / "out"
    records = _write(out, cells)
    assert (sum(len(r["metrics"]) for r in records) > CHUNK_VALUES) == (cells > CELLS)
    done = run_aorta(["matrix", str(out)], cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    long = pl.read_parquet(out / "matrix.parquet")
    values, texts, kinds = _expected_long(records)
    got_values = {(c, t, m): v for c, t, m, v in
                  long.filter(pl.col("value").is_not_null())
                  .select("cell", "trial", "metric", "value").iter_rows()}
    got_texts = {(c, t, m): x for c, t, m, x in
                 long.filter(pl.col("text").is_not_null())
                 .select("cell", "trial", "metric", "text").iter_rows()}
    assert got_values == values
    assert got_texts == texts
    assert long.height == len(values) + len(texts)

    numbers = pl.DataFrame(
        [(c, m, v) for (c, t, m), v in values.items() if VERDICTS[t] == "pass"],
        schema={"cell": pl.String, "metric": pl.String, "value": pl.Float64}, orient="row")
    expected = {(c, m): s for c, m, *s in numbers.group_by("cell", "metric").agg(
        pl.col("value").mean(), pl.col("value").median().alias("median"),
        pl.col("value").std().alias("std"), pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"), pl.col("value").count().alias("n")).iter_rows()}
    matrix = json.loads((out / "matrix.json").read_text())
    got = {}
    for cell in matrix["cells"]:
        got[(cell["cell"], "wall_time_s")] = cell["wall_time_s"]
        got |= {(cell["cell"], m): s for m, s in cell["metrics_summary"].items()}
    assert got.keys() == expected.keys()
    for key, (mean, median, std, low, high, n) in expected.items():
        s = got[key]
        assert (s["min"], s["max"], s["n"]) == (low, high, n), key
        assert s["mean"] == pytest.approx(mean, rel=1e-12)
        assert s["median"] == pytest.approx(median, rel=1e-12)
        assert s["std"] == (None if std is None else pytest.approx(std, rel=1e-12))

    for cell in matrix["cells"]:  # metrics_text: the first passing trial's, as they were
        first = min((r for r in records if r["cell"] == cell["cell"] and r["verdict"] == "pass"),
                    key=lambda r: r["trial"])
        text = {k: texts[(first["cell"], first["trial"], k)] if len(kinds[k]) > 1 else v
                for k, v in first["metrics"].items()
                if (first["cell"], first["trial"], k) in texts and not k.endswith("_artifact_dir")}
        assert cell["metrics_text"] == text and text["shared_changes"] == "7.5"

    perf = (out / "perf.md").read_text()
    statistics = sum(len(c["metrics_summary"]) for c in matrix["cells"])
    assert f"Numeric metrics: {statistics} statistics over {cells} cells" in perf
    assert "shared_f0" not in perf and len(perf) < 10_000


def test_the_same_trials_give_the_same_matrix_in_either_layout(tmp_path: Path):
    """Twenty trials' metrics built column by column (dense), and again with forty names of
    their own added to each trial (so value by value): the shared metrics' statistics, texts and
    long-form rows are identical, to the bit (the rows in another order: metric by metric in the
    one, trial by trial in the other)."""
    rnd = random.Random(7)
    shared = [{"x_ms": rnd.uniform(0, 1e4), "x_n": rnd.randint(0, 10**6),
               "x_mix": rnd.randint(0, 9) if t % 3 else rnd.random(), "x_on": t % 2 == 1,
               "x_name": f"k{t % 4}", "x_top": [f"a{t}", "b"], "x_odd": "t" if t % 2 else 1.5}
              for t in range(20)]
    outputs = []
    for padded in (False, True):
        out = tmp_path / f"padded={padded}"
        for t, metrics in enumerate(shared):
            own = {f"pad{t}_{k}": rnd.random() for k in range(40)} if padded else {}
            record = {"schema_version": SCHEMA_VERSION, "cell": f"c={t % 2}",
                      "axes": {"c": str(t % 2)}, "trial": t // 2,
                      "verdict": "fail" if t % 7 == 6 else "pass", "wall_time_s": 1 + t / 8,
                      "metrics": metrics | own,
                      "environment": {"host": "h", "gpus": [], "packages": {}, "python": "3"}}
            folder = out / "cells" / record["cell"] / f"trial_{t // 2:03d}"
            folder.mkdir(parents=True)
            write_json_atomic(folder / "record.json", record)
        done = run_aorta(["matrix", str(out)], cwd=tmp_path, env=NO_GPU)
        assert done.returncode == 0, done.stderr
        outputs.append(out)
    dense, sparse = (json.loads((o / "matrix.json").read_text())["cells"] for o in outputs)
    for a, b in zip(dense, sparse, strict=True):
        assert a["wall_time_s"] == b["wall_time_s"]
        assert a["metrics_summary"] == {k: v for k, v in b["metrics_summary"].items()
                                        if not k.startswith("pad")}
        assert a["metrics_text"] == b["metrics_text"] and a["metrics_text"]
    rows = [pl.read_parquet(o / "matrix.parquet").filter(~pl.col("metric").str.starts_with("pad"))
            .sort("cell", "trial", "metric") for o in outputs]
    assert rows[0].equals(rows[1]) and rows[0].height > 20 * 7


def test_the_report_of_many_sparse_names_counts_them_instead_of_a_column_each(tmp_path: Path):
    """report.html, like perf.md, keeps a column per metric only while the table of cells x
    names is small or mostly filled: here it would have ~18,000 columns, nearly all empty."""
    out = tmp_path / "out"
    _write(out, CELLS)
    assert run_aorta(["matrix", str(out)], cwd=tmp_path, env=NO_GPU).returncode == 0
    done = run_aorta(["report", "sweep", str(out)], cwd=tmp_path,
                     env={**NO_GPU, "AORTA_REPORT_PNG": "0"})
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text()
    matrix = json.loads((out / "matrix.json").read_text())
    statistics = sum(len(c["metrics_summary"]) for c in matrix["cells"])
    names = len({m for c in matrix["cells"] for m in c["metrics_summary"]})
    assert names > 10_000
    assert (f"Numeric metrics: {statistics} statistics of {names} names over {CELLS} cells, too "
            "many names for a column each") in page
    assert "<th>r3_0</th>" not in page and "<th>shared_f0</th>" not in page
    assert page.count("<th>") < 60, page.count("<th>")
