"""Real CPU runs: a 2-process torchrun gloo job (FSDP2 and DDP) and single-process env modes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import orjson
import pytest

from aorta_core.benchmark.schema import RankRecord, decode_line

#: Measured only with CUDA events: must be absent on CPU (never 0, never null).
STREAM_FIELDS = ("compute_ms", "allreduce_ms", "reducescatter_ms", "aux_ms",
                 "compute_allreduce_ms", "compute_reducescatter_ms", "compute_allgather_ms",
                 "compute_comm_ms", "idle_ms", "overlap_ratio", "comm_hidden_ratio",
                 "compute_tflops", "gpu")


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory, benchmark_runner, tiny):
    out = tmp_path_factory.mktemp("fsdp")
    proc = benchmark_runner(
        [*tiny, "training.max_steps=4", f"output_dir={out}", "profiling.enabled=true",
         "profiling.wait=0", "profiling.warmup=1", "profiling.active=2"],
        extra_env={"AORTA_METRICS_PATH": str(out / "metrics" / "workload.json")}, nproc=2,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_every_rank_writes_schema_valid_jsonl(fsdp_run):
    for rank in (0, 1):
        records = [decode_line(line) for line in lines(fsdp_run / f"rank_{rank:02d}_metrics.jsonl")]
        assert [r.global_step for r in records] == [0, 1, 2, 3]
        assert {(r.rank, r.world_size, r.device, r.telemetry) for r in records} == {
            (rank, 2, "cpu", True)}
        for r in records:
            assert r.time_end_unix_ns > r.time_start_unix_ns
            assert r.step_time_ms > 0 and r.samples_per_s > 0 and r.tflops > 0
            assert r.profile.clock == "wall"
            assert set(r.phase_ms) == {"data", "forward", "backward", "grad_clip", "optimizer"}
            # FSDP2 on gloo: all-gathers in forward/backward, reduce-scatters in backward.
            assert r.comm_calls["allgather"] > 0 and r.comm_calls["reducescatter"] > 0
            assert all(x.end_ms >= x.start_ms >= 0 for x in r.profile.ranges)
    timestamps = [decode_line(line).time_start_unix_ns
                  for line in lines(fsdp_run / "rank_00_metrics.jsonl")]
    assert timestamps == sorted(timestamps)


def test_cpu_stream_fields_are_absent_not_zero(fsdp_run):
    for line in lines(fsdp_run / "rank_01_metrics.jsonl"):
        raw = orjson.loads(line)
        assert not set(STREAM_FIELDS) & set(raw)
        assert "overlap" not in raw["profile"]
        assert all("stream" not in r for r in raw["profile"]["ranges"])


def test_schema_rejects_zeroed_or_unknown_fields(fsdp_run):
    raw = orjson.loads(lines(fsdp_run / "rank_00_metrics.jsonl")[0])
    with pytest.raises(msgspec.ValidationError):
        decode_line(orjson.dumps({**raw, "compute_ms": None}))
    with pytest.raises(msgspec.ValidationError):
        decode_line(orjson.dumps({**raw, "overlap_ratioo": 0.5}))


def test_profiler_block_writes_a_trace_per_rank(fsdp_run):
    """The block runs through torchprof's payload session: its names, one folder per rank."""
    for rank in (0, 1):
        traces = sorted((fsdp_run / "torch_profiler" / f"rank{rank}").glob("*.pt.trace.json"))
        assert [t.name for t in traces] == [f"rank{rank}.step3.pt.trace.json"]
        trace = json.loads(traces[0].read_text())
        assert trace["distributedInfo"]["rank"] == rank
        names = {e.get("name", "") for e in trace["traceEvents"]}
        assert {"ProfilerStep#1", "ProfilerStep#2"} <= names


def test_metrics_file_for_the_matrix(fsdp_run):
    metrics = orjson.loads((fsdp_run / "metrics" / "workload.json").read_bytes())
    assert metrics["steps"] == 4 and metrics["world_size"] == 2
    assert metrics["step_time_ms"] > 0 and metrics["samples_per_s"] > 0
    last = decode_line(lines(fsdp_run / "rank_00_metrics.jsonl")[-1])
    assert metrics["loss_final"] == last.loss
    assert "overlap_ratio" not in metrics  # not measured on CPU
    assert not list((fsdp_run / "metrics").glob(".*tmp"))


def test_ddp_matches_fsdp_numerics(fsdp_run, tmp_path, benchmark_runner, tiny):
    argv = [*tiny, "training.max_steps=4", f"output_dir={tmp_path}", "parallel=ddp"]
    proc = benchmark_runner(argv, nproc=2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = [decode_line(x) for x in lines(tmp_path / "rank_01_metrics.jsonl")]
    fsdp = [decode_line(x) for x in lines(fsdp_run / "rank_01_metrics.jsonl")]
    assert [r.loss for r in ddp] == pytest.approx([r.loss for r in fsdp], rel=1e-4)
    assert all(r.comm_calls == {"allreduce": 1} for r in ddp)  # one bucket, via the comm hook


@pytest.fixture(scope="module")
def env_mode_run(tmp_path_factory, benchmark_runner, tiny):
    """One process under the sweep's env contract: trial dir and torchprof's env mode."""
    trial = tmp_path_factory.mktemp("trial")
    options = {"wait": 0, "warmup": 1, "active": 1, "repeat": 1, "gzip": True,
               "chrome_trace": True, "tensorboard": False, "mode": "env", "activities": []}
    proc = benchmark_runner(tiny, extra_env={
        "AORTA_TRIAL_DIR": str(trial), "AORTA_TORCHPROF_DIR": str(trial / "torchprof"),
        "AORTA_TORCHPROF_OPTIONS": json.dumps(options)
    })
    assert proc.returncode == 0, proc.stderr[-3000:]
    return trial, proc


def test_trial_dir_is_the_default_output(env_mode_run):
    trial, _ = env_mode_run
    assert len(lines(trial / "benchmark" / "rank_00_metrics.jsonl")) == 3


def test_torchprof_env_mode_drives_the_profiler(env_mode_run):
    """The collector's options and folder win over the block; its schedule follows the
    optimizer (``step_on`` left at its default): warm-up step 0, step 1 recorded."""
    trial, _ = env_mode_run
    traces = [p.name for p in (trial / "torchprof").glob("*.json*")]
    assert traces == ["rank0.step2.pt.trace.json.gz"]
    trace = json.loads(gzip.decompress((trial / "torchprof" / traces[0]).read_bytes()))
    assert "ProfilerStep#1" in {e.get("name") for e in trace["traceEvents"]}


def test_profiler_block_without_a_collector_session_says_so(tmp_path, benchmark_runner, tiny):
    proc = benchmark_runner([*tiny, "training.max_steps=1", f"output_dir={tmp_path}",
                             "profiling.enabled=true"],
                            extra_env={"AORTA_DISABLE_PLUGINS": "torchprof"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no collector session runs in this process" in proc.stderr
    assert not (tmp_path / "torch_profiler").exists()


def test_seeded_runs_reproduce_and_telemetry_does_not_change_numerics(
        env_mode_run, tmp_path, benchmark_runner, tiny):
    trial, _ = env_mode_run
    proc = benchmark_runner([*tiny, f"output_dir={tmp_path}", "telemetry.enabled=false"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = [decode_line(x) for x in lines(trial / "benchmark" / "rank_00_metrics.jsonl")]
    again = [decode_line(x) for x in lines(tmp_path / "rank_00_metrics.jsonl")]
    assert [(r.loss, r.grad_norm, r.lr) for r in again] == [
        (r.loss, r.grad_norm, r.lr) for r in first]
    raw = orjson.loads(lines(tmp_path / "rank_00_metrics.jsonl")[0])
    assert raw["telemetry"] is False
    assert not {"profile", "phase_ms", "comm_ms", *STREAM_FIELDS} & set(raw)


def test_a_different_seed_changes_the_run(env_mode_run, tmp_path, benchmark_runner, tiny):
    trial, _ = env_mode_run
    proc = benchmark_runner([*tiny, f"output_dir={tmp_path}", "seed=7"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = msgspec.json.decode(lines(trial / "benchmark" / "rank_00_metrics.jsonl")[0],
                                type=RankRecord)
    other = decode_line(lines(tmp_path / "rank_00_metrics.jsonl")[0])
    assert other.loss != first.loss
