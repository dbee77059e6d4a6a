"""`aorta parse torchprof` over several real rank traces: the worker pool gives the sequential
result, and the tool's calls share one pool (aorta_core.api.parallel.shared_workers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_helpers import run_aorta

from aorta_core.api.parallel import WORKERS_ENV, shared_workers

FIXTURES = Path(__file__).parent.parent / "plugins" / "aorta_torchprof" / "tests" / "fixtures"
TRACES = ["cpu_gloo_2rank/rank0.step4.pt.trace.json.gz",
          "cpu_gloo_2rank/rank1.step4.pt.trace.json.gz",
          "cuda_h200/torchprof/rank0.step5.pt.trace.json",
          "cuda_h200_bench/torchprof/rank0/rank0_step4.pt.trace.json.gz",
          "cpu_single/rank0.step5.pt.trace.json"]


def _capture(folder: Path) -> Path:
    for i, name in enumerate(TRACES):  # one folder per trace, as each rank's profiler writes
        (folder / f"r{i}").mkdir(parents=True)
        shutil.copy(FIXTURES / name, folder / f"r{i}" / Path(name).name)
    return folder


def test_parallel_parse_equals_sequential(tmp_path: Path) -> None:
    folder = _capture(tmp_path / "torchprof")
    runs = {w: run_aorta(["parse", "torchprof", str(folder)], tmp_path, env={WORKERS_ENV: w})
            for w in ("1", "2")}
    for done in runs.values():
        assert done.returncode == 0, done.stderr
    sequential, parallel = (json.loads(runs[w].stdout) for w in ("1", "2"))
    assert sequential["torchprof_trace_count"] == len(TRACES)
    assert parallel == sequential


def test_a_shared_pool_parses_as_a_fresh_one(tmp_path: Path, monkeypatch) -> None:
    from aorta_torchprof.parse import parse_dir

    folder = _capture(tmp_path / "torchprof")
    monkeypatch.setenv(WORKERS_ENV, "1")
    sequential = parse_dir(folder)
    monkeypatch.setenv(WORKERS_ENV, "2")
    with shared_workers():  # twice on one pool, as a command over several trials does
        shared = [parse_dir(folder), parse_dir(folder)]
    assert shared == [sequential, sequential]
