"""Our overlap and kernel classes against HolisticTraceAnalysis itself (skipped without HTA).

HTA truncates ``ts``/``dur`` to whole µs while loading, so the ratios compared here come from
traces with whole-µs times (as 2023-era Kineto wrote them); both sides then see identical
intervals. The H200 traces (ns precision, no communication) are compared on what does not
depend on that truncation: the absent overlap and the class of every GPU-lane event name.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import math
from pathlib import Path

import pytest
from aorta_torchprof.hta_overlap import kernel_class
from aorta_torchprof.parse import parse_dir
from needs import need

need("hta.trace_analysis")
BENCH = Path(__file__).resolve().parents[3] / "bench" / "bench_torchprof_parse.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_torchprof_parse", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hta_pctg(folder: Path, include_last: bool) -> float:
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    analysis = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include_last)
    return float(analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].iloc[0])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("drop_last", [True, False])
def test_overlap_matches_hta(tmp_path: Path, seed: int, drop_last: bool) -> None:
    _bench().make_trace(tmp_path / "rank0.pt.trace.json", 3000, seed=seed, integer_us=True)
    ours = parse_dir(tmp_path, drop_last_profiler_step=drop_last)["torchprof_overlap_ratio"]
    hta = _hta_pctg(tmp_path, include_last=not drop_last)
    assert abs(round(100 * ours, 2) - hta) <= 0.01, (ours, hta)


def test_dropping_the_last_step_changes_the_window(tmp_path: Path) -> None:
    _bench().make_trace(tmp_path / "rank0.pt.trace.json", 3000, seed=2, integer_us=True)
    kept = parse_dir(tmp_path)["torchprof_kernel_count"]
    dropped = parse_dir(tmp_path, drop_last_profiler_step=True)["torchprof_kernel_count"]
    assert 0 < dropped < kept


# Real CUDA traces from an H200 (fixtures/PROVENANCE.md); HTA reads one folder, not subfolders.
H200 = [
    Path(__file__).parent / "fixtures" / "cuda_h200" / "torchprof",
    Path(__file__).parent / "fixtures" / "cuda_h200_bench" / "torchprof" / "rank0",
]


@pytest.mark.parametrize("folder", H200, ids=["train_tiny", "benchmark"])
@pytest.mark.parametrize("drop_last", [True, False])
def test_h200_trace_without_communication_has_no_overlap(folder: Path, drop_last: bool) -> None:
    """HTA gives NaN (no communication to divide by); we leave the ratio out."""
    assert math.isnan(_hta_pctg(folder, include_last=not drop_last))
    metrics = parse_dir(folder, drop_last_profiler_step=drop_last)
    assert metrics["torchprof_kernel_count"] > 0
    assert "torchprof_overlap_ratio" not in metrics
    assert "torchprof_comm_ms" not in metrics


def _events(path: Path) -> list[dict]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)["traceEvents"]


@pytest.mark.parametrize("folder", H200, ids=["train_tiny", "benchmark"])
def test_h200_kernel_classes_match_hta(folder: Path) -> None:
    from hta.utils.utils import get_kernel_type

    names = {
        e["name"]
        for path in folder.iterdir()
        for e in _events(path)
        if e.get("cat") in {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"}
    }
    assert names
    assert {n: kernel_class(n) for n in names} == {n: get_kernel_type(n).lower() for n in names}
