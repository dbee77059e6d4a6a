"""Record building for CUDA-event timing (the GPU path's arithmetic), summary, metrics file."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import torch

from aorta_core.benchmark.config import DataConfig, ModelConfig
from aorta_core.benchmark.gpu_diag import make_sampler, parse_amd_smi, parse_rocm_smi
from aorta_core.benchmark.model import train_flops_per_step
from aorta_core.benchmark.profiling import torch_profiler_request
from aorta_core.benchmark.schema import Range, decode_line
from aorta_core.benchmark.stream_timing import IterationTiming
from aorta_core.benchmark.telemetry import StepInfo, Summary, build_record, write_metrics_atomic


def info(step: int, step_time_ms: float = 10.0) -> StepInfo:
    return StepInfo(rank=0, world_size=2, epoch=0, step=step, global_step=step, loss=0.5,
                    grad_norm=1.0, lr=1e-3, device="cuda", time_start_unix_ns=1,
                    time_end_unix_ns=2, step_time_ms=step_time_ms, samples=8, flops=10**10)


def cuda_timing() -> IterationTiming:
    def r(kind, stream, a, b):
        return Range(kind=kind, tag=kind, start_ms=a, end_ms=b, duration_ms=b - a, stream=stream)

    return IterationTiming("cuda_event", 10.0, [
        r("forward", "compute", 0, 3), r("backward", "compute", 3, 8),
        r("allgather", "aux", 0, 1), r("reducescatter", "reducescatter", 6, 9),
        r("optimizer", "aux", 9, 10),
    ])


def test_cuda_record_has_stream_and_overlap_fields():
    rec = build_record(info(0), cuda_timing(), {"allgather": 1, "reducescatter": 1}, None)
    back = decode_line(msgspec.json.encode(rec))
    assert back.compute_ms == 8.0 and back.reducescatter_ms == 3.0 and back.aux_ms == 2.0
    assert back.compute_comm_ms == 3.0  # 0-1 all-gather + 6-8 reduce-scatter
    assert back.overlap_ratio == pytest.approx(3.0 / 8.0)
    assert back.comm_hidden_ratio == pytest.approx(3.0 / 4.0)
    assert back.idle_ms == 0.0
    assert back.compute_tflops == pytest.approx(10**10 / 8e-3 / 1e12)
    assert back.tflops == pytest.approx(10**10 / 10e-3 / 1e12)
    assert back.samples_per_s == pytest.approx(800.0)
    assert back.profile.overlap.overlap_ms.compute_reducescatter == 2.0
    assert back.phase_ms == {"forward": 3.0, "backward": 5.0, "optimizer": 1.0}


def test_summary_skips_warmup_and_averages_measured_steps(tmp_path: Path):
    summary = Summary(skip=1)
    for step, ms in enumerate((100.0, 10.0, 12.0, 11.0)):
        summary.add(build_record(info(step, ms), cuda_timing(), {}, None), step * 10**7,
                    step * 10**7 + int(ms * 1e6))
    metrics = summary.metrics()
    assert metrics["step_time_ms"] == 11.0 and metrics["steps"] == 4
    assert metrics["overlap_ratio"] == pytest.approx(3.0 / 8.0)
    write_metrics_atomic(tmp_path / "m.json", metrics)
    assert msgspec.json.decode((tmp_path / "m.json").read_bytes()) == metrics
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_flop_model_counts_linear_and_attention():
    model = ModelConfig(vocab_size=10, embedding_dim=4, num_dense_features=1, dense_dim=2,
                        model_dim=8, num_heads=2, num_layers=1, mlp_hidden_dim=16)
    data = DataConfig(batch_size=1, sequence_length=2)
    linear = 4 * 8 + 1 * 2 * 8 + (4 * 64 + 2 * 8 * 16) + 8 * 4 + 4
    attention = 2 * 1 * 2**2 * 8
    assert train_flops_per_step(model, data) == 3 * 2 * (2 * linear + attention)


def test_rocm_smi_json_keys_map_to_fields():
    # Key spellings of `rocm-smi --json` as public parsers use them (not a capture: no AMD host).
    sample = parse_rocm_smi({"card0": {
        "Temperature (Sensor edge) (C)": "65.0",
        "Current Socket Graphics Package Power (W)": "402.0",
        "GPU use (%)": "88", "sclk clock speed:": "(1700Mhz)", "VRAM Total Memory (B)": "1024",
        "VRAM Total Used Memory (B)": "512", "Card series": "AMD Instinct MI250X"}})
    assert (sample.temperature_c, sample.power_w, sample.utilization_pct) == (65.0, 402.0, 88.0)
    assert (sample.sm_clock_mhz, sample.memory_used_bytes, sample.memory_total_bytes) == (
        1700.0, 512, 1024)
    assert parse_rocm_smi({"system": {}}) is None
    assert parse_amd_smi([]) is None


def test_gpu_diagnostics_on_cpu_warn_and_stay_absent():
    with pytest.warns(UserWarning, match="no GPU"):
        assert make_sampler(torch.device("cpu")) is None


def test_profiling_block_becomes_a_torch_profiler_request(tmp_path: Path):
    """The block's own keys decide where and whether; every other key is passed on as set."""
    assert torch_profiler_request({"enabled": False, "active": 5}, tmp_path, 0,
                                  torch.device("cpu")) is None
    block = {"enabled": True, "rocm_trace_export": False, "trace_dir": str(tmp_path / "traces"),
             "wait": 2, "active": 5, "gzip": True, "chrome_trace": True}
    assert torch_profiler_request(block, tmp_path / "run", 3, torch.device("cpu")) == {
        "wait": 2, "active": 5, "gzip": True, "chrome_trace": True, "step_on": "manual",
        "activities": ["cpu"], "dir": str(tmp_path / "traces" / "rank3"),
    }
    default = torch_profiler_request({"enabled": True, "trace_dir": None}, tmp_path, 1,
                                     torch.device("cpu"))
    assert default["dir"] == str(tmp_path / "torch_profiler" / "rank1")


