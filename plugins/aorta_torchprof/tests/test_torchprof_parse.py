"""Parser tests on real Kineto traces (fixtures/PROVENANCE.md); the fuzzing: *_fuzz.py."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
from aorta_torchprof.hta_overlap import (
    COMMUNICATION,
    COMPUTATION,
    MEMORY,
    OTHER,
    Overlap,
    kernel_class,
)
from aorta_torchprof.parse import parse_dir
from aorta_torchprof.trace import rank_from_name

from aorta_core.api.intervals import merged

FIXTURES = Path(__file__).parent / "fixtures"


def _events(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".json.gz"):
            out += json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        elif path.name.endswith(".json"):
            out += json.loads(path.read_text())["traceEvents"]
    return out


def test_rocm_trace_kernels_from_fixture() -> None:
    folder = FIXTURES / "rocm_mi350"
    kernels = [e for e in _events(folder) if e.get("cat") == "kernel"]
    metrics = parse_dir(folder)
    assert metrics["torchprof_kernel_count"] == len(kernels) == 4
    assert abs(metrics["torchprof_gpu_time_ms"] - sum(e["dur"] for e in kernels) / 1e3) < 1e-9
    hottest = max(kernels, key=lambda e: e["dur"])
    assert metrics["torchprof_top_kernels"][0] == hottest["name"]
    assert metrics["torchprof_top_kernels"][0].endswith(".kd")
    assert metrics["torchprof_top_kernel_ms"] == hottest["dur"] / 1e3
    # No NCCL/RCCL kernel: the ratio is absent, not zero.
    assert "torchprof_overlap_ratio" not in metrics
    assert "torchprof_comm_ms" not in metrics
    assert "torchprof_cpu_op_ms" not in metrics


def test_cpu_trace_reports_cpu_ops_not_gpu_numbers() -> None:
    folder = FIXTURES / "cpu_single"
    ops = [e for e in _events(folder) if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    metrics = parse_dir(folder)
    assert metrics["torchprof_cpu_op_count"] == len(ops)
    assert not any(key.startswith(("torchprof_kernel", "torchprof_gpu")) for key in metrics)
    assert len(metrics["torchprof_top_cpu_ops"]) == 5
    assert set(metrics["torchprof_top_cpu_ops"]) <= {e["name"] for e in ops}
    # Self times partition the time spent in operators: at most the top-level op time.
    lanes_total = sum(e["dur"] for e in ops) / 1e3
    assert 0 < metrics["torchprof_top_cpu_op_ms"] <= metrics["torchprof_cpu_op_ms"] < lanes_total


def test_torchrun_gloo_ranks_from_distributed_info() -> None:
    folder = FIXTURES / "cpu_gloo_2rank"
    metrics = parse_dir(folder)
    assert metrics["torchprof_trace_count"] == 2
    assert metrics["torchprof_rank_count"] == 2
    assert "c10d::allreduce_" in metrics["torchprof_top_cpu_ops"]


def test_rank_from_name() -> None:
    assert rank_from_name(Path("x/rank3.step4.pt.trace.json")) == 3
    assert rank_from_name(Path("rank-34.Jul_15.pt.trace.json.gz")) == 34
    assert rank_from_name(Path("tb/rank2/host_1.pt.trace.json")) == 2
    assert rank_from_name(Path("host_1.pt.trace.json")) == 0


def test_hta_kernel_classes() -> None:
    assert kernel_class("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)") == COMMUNICATION
    assert kernel_class("void ncclKernel_AllReduce_RING_LL_Sum_float(x)") == COMMUNICATION
    assert kernel_class("hipMemcpyAsync") == COMMUNICATION  # HTA: any ^hip is communication
    assert kernel_class("Memcpy HtoD (Pageable -> Device)") == MEMORY
    assert kernel_class("Memset (Device)") == MEMORY
    assert kernel_class("Stream Sync") == OTHER
    assert kernel_class("my_dma_kernel") == OTHER
    assert kernel_class("Cijk_Ailk_Bjlk_S_B.kd") == COMPUTATION


def test_overlap_on_hand_made_intervals() -> None:
    names = ["nccl_a", "gemm", "gemm", "nccl_b", "Memcpy HtoD"]
    spans = [(0.0, 10.0), (5.0, 9.0), (8.0, 14.0), (30.0, 40.0), (0.0, 100.0)]
    of_class = {cls: merged(s for n, s in zip(names, spans, strict=True) if kernel_class(n) == cls)
                for cls in (COMMUNICATION, COMPUTATION)}
    result = Overlap.of(of_class[COMMUNICATION], of_class[COMPUTATION])
    # comm = [0,10) ∪ [30,40) = 20; comp = [5,14) = 9; both = [5,10) = 5.
    assert (result.comm_us, result.compute_us, result.overlap_us) == (20.0, 9.0, 5.0)
    assert result.ratio == 0.25
    assert Overlap.of([], merged([(0.0, 3.0)])).ratio is None
    # HTA's merge joins touching intervals and keeps the order of starts, not of ends
    assert merged([(4.0, 5.0), (0.0, 2.0), (2.0, 3.0)]) == [(0.0, 3.0), (4.0, 5.0)]


def test_missing_and_empty_dirs(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert parse_dir(tmp_path / "absent") == {}
        assert parse_dir(tmp_path) == {}
    assert [str(w.message) for w in caught] == [
        f"torchprof: no Kineto trace (*.json, *.json.gz) in {folder}: nothing wrote one there "
        "(the workload ended before a profiler exported a trace, or it crashed first); see the "
        "trial's stderr.log" for folder in (tmp_path / "absent", tmp_path)]


def test_bad_file_skipped_good_file_kept(tmp_path: Path) -> None:
    good = FIXTURES / "rocm_mi350" / "smci350_trimmed.pt.trace.json"
    (tmp_path / "rank0.pt.trace.json").write_bytes(good.read_bytes())
    (tmp_path / "rank1.pt.trace.json").write_text('{"traceEvents": [')
    (tmp_path / "rank2.pt.trace.json.gz").write_bytes(b"not gzip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = parse_dir(tmp_path)
    assert metrics["torchprof_trace_count"] == 1
    assert metrics["torchprof_kernel_count"] == 4
    assert sum("skipping" in str(w.message) for w in caught) == 2


def test_odd_field_types_fall_back_to_tolerant_decode(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "rocm_mi350" / "smci350_trimmed.pt.trace.json").read_text())
    doc["traceEvents"][3]["ts"] = "oops"  # a kernel with a string timestamp is dropped
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": 5, "ts": 1, "dur": True})
    (tmp_path / "t.json").write_text(json.dumps(doc))
    assert parse_dir(tmp_path)["torchprof_kernel_count"] == 3


def test_a_ranks_profiler_cycles_join_on_its_clock(tmp_path: Path) -> None:
    """Rank 0 traced twice over the same kernels (two cycles' files at the same times) and
    rank 1 once, from the real H200 benchmark trace: rank 0's compute is the union of its two
    files' intervals (the only files whose intervals reach the parent), not their sum."""
    from aorta_torchprof.parse import _sharing_a_rank

    source = FIXTURES / "cuda_h200_bench/torchprof/rank0/rank0_step4.pt.trace.json.gz"
    alone = parse_dir(source.parent)
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for name, rank in (("rank0_step4", 0), ("rank0_step8", 0), ("rank1_step4", 1)):
        doc["distributedInfo"]["rank"] = rank
        (tmp_path / f"{name}.pt.trace.json").write_text(json.dumps(doc))
    files = sorted(tmp_path.iterdir())
    assert _sharing_a_rank(files, tmp_path) == {tmp_path / "rank0_step4.pt.trace.json",
                                                tmp_path / "rank0_step8.pt.trace.json"}
    both = parse_dir(tmp_path)
    assert both["torchprof_rank_count"] == 2 and both["torchprof_trace_count"] == 3
    assert np.isclose(both["torchprof_gpu_time_ms"], 3 * alone["torchprof_gpu_time_ms"])
    assert np.isclose(both["torchprof_compute_ms"], alone["torchprof_compute_ms"])
    # a file whose head names no rank: every file keeps its intervals
    (tmp_path / "rank2.pt.trace.json").write_text(json.dumps({"traceEvents": []}))
    assert _sharing_a_rank(sorted(tmp_path.iterdir()), tmp_path) is None
