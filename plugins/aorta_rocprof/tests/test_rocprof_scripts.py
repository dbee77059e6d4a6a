"""The legacy scripts run for real as docs/legacy-rocprof-scripts.md writes them: 2 gloo torchrun
ranks under the stand-in rocprofv3, and in a "container" through a stand-in docker CLI.

The ranks are on the CPU (``device=cpu``) on any machine: the stand-in profiles nothing, and two
ranks on a host's one GPU would be refused by NCCL.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import yaml
from aorta_rocprof import plugin

REPO = Path(__file__).resolve().parents[3]
STANDIN = Path(__file__).parent / "standin" / "rocprofv3"
GEMM_INPUT = REPO / "scripts" / "gemm_analysis" / "rocprof_input.yaml"
LOCAL_LAUNCH = REPO / "scripts" / "multi_node" / "local_launch.sh"
#: After the guide's command: a CPU run of 2 steps (the file's model is upstream's).
CPU_SIZED = ["device=cpu", "model=tiny", "data.batch_size=2", "data.sequence_length=8",
             "data.sparse_features=4", "training.max_steps=2"]
TINY_YAML = ("device: cpu\nmodel:\n  num_layers: 1\ntraining:\n  max_steps: 2\n"
             "data:\n  batch_size: 2\n")
#: Keys of a job in rocprofv3's input file and their JSON-schema types, from
#: projects/rocprofiler-sdk/source/docs/rocprofv3_input_schema.json (ROCm/rocm-systems).
INPUT_SCHEMA = {
    **dict.fromkeys(
        ["hip_trace", "hip_runtime_trace", "hip_compiler_trace", "marker_trace", "kernel_trace",
         "memory_copy_trace", "memory_allocation_trace", "rocdecode_trace", "rocjpeg_trace",
         "scratch_memory_trace", "stats", "hsa_trace", "hsa_core_trace", "hsa_amd_trace",
         "hsa_finalize_trace", "hsa_image_trace", "runtime_trace", "sys_trace",
         "mangled_kernels", "truncate_kernels", "list_metrics", "disable-signal-handlers",
         "process-sync", "pc-sampling-beta-enabled"], bool),
    **dict.fromkeys(
        ["kernel_include_regex", "kernel_exclude_regex", "kernel_iteration_range",
         "output_file", "output_directory", "log_level", "pc_sampling_unit",
         "pc_sampling_method"], str),
    **dict.fromkeys(["pmc", "pmc_raw", "pmc_groups", "output_format", "preload"], list),
    **dict.fromkeys(["pmc_group_interval", "minimum-output-data", "pc_sampling_interval"], int),
}


def script_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This venv's torchrun and python3 first on PATH, then the stand-in docker."""
    path = os.pathsep.join([str(Path(sys.executable).parent), str(STANDIN.parent),
                            os.environ["PATH"]])
    return {**os.environ, "PATH": path, "ROCPROF_BIN": str(STANDIN), "OMP_NUM_THREADS": "1",
            "DOCKER_STANDIN_LOG": str(tmp_path / "docker.jsonl"), **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rocprof_metrics(folder: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plugin.parse_metrics(artifact_dir=folder, options=None)


def test_the_guides_rocprof_capture_command(tmp_path: Path):
    bench_out = tmp_path / "bench"
    env = script_env(tmp_path, ROCPROF_OUTPUT_DIR=str(tmp_path / "tr"), NPROC="2")
    guide = ["bash", "scripts/rocprof_capture.sh", "config/default.yaml", "--override",
             "training.max_steps=50"]
    assert " ".join(guide) in (REPO / "docs" / "legacy-rocprof-scripts.md").read_text()
    done = subprocess.run([*guide, *CPU_SIZED, f"training.output_dir={bench_out}"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "tr").iterdir()
    assert run_dir.name.startswith("run_")
    assert rocprof_metrics(run_dir)["rocprof_kernel_count"] == 1  # the stand-in's one dispatch
    lines = (bench_out / "rank_00_metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and (bench_out / "rank_01_metrics.jsonl").exists()
    assert json.loads(lines[0])["world_size"] == 2
    saved = yaml.safe_load((bench_out / "config.yaml").read_text())
    assert saved["training"]["warmup_steps"] == 100  # from config/default.yaml
    assert (saved["model"]["model_dim"], saved["training"]["max_steps"]) == (32, 2)


def test_rocprof_capture_refuses_a_missing_config(tmp_path: Path):
    done = subprocess.run(["bash", str(REPO / "scripts" / "rocprof_capture.sh"),
                           str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert done.returncode == 1
    assert "not found; give a benchmark config YAML" in done.stderr


def test_gemm_input_file_fits_rocprofv3s_documented_schema():
    data = yaml.safe_load(GEMM_INPUT.read_text())
    assert list(data) == ["jobs"] and len(data["jobs"]) == 1  # one job: one training run
    (job,) = data["jobs"]
    for key, value in job.items():
        assert key in INPUT_SCHEMA, f"{key} is not a rocprofv3 input-file key"
        assert isinstance(value, INPUT_SCHEMA[key]), f"{key}: {value!r}"
    assert set(job["output_format"]) <= {"csv", "json", "pftrace", "otf2", "rocpd"}
    assert all(isinstance(c, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", c) for c in job["pmc"])
    assert not {"output_directory", "output_file"} & set(job)  # the scripts give -d
    gemm = re.compile(job["kernel_include_regex"])
    assert gemm.search("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_GRVW8")
    assert gemm.search("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl>")
    assert gemm.search("_gemm_kernel_0d1d2d3d")  # Triton
    assert not gemm.search("void at::native::vectorized_elementwise_kernel<4>")


def local_launch(tmp_path: Path, config: Path, *optional: str, **env: str):
    args = ["0", "127.0.0.1", "127.0.0.1", str(free_port()), "1", "2", str(tmp_path / "exp"),
            str(config), "2", "28", "256", *optional]
    return subprocess.run(["bash", str(LOCAL_LAUNCH), *args], env=script_env(tmp_path, **env),
                          capture_output=True, text=True, timeout=300)


def test_local_launch_runs_in_the_named_container_with_the_gemm_input(tmp_path: Path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    done = local_launch(tmp_path, config, "true", "false", str(GEMM_INPUT), "trainer",
                        DOCKER_STANDIN_RUNNING="trainer")
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "exp" / "256thread_28channels"
    trace_dir = out / "rocprof_traces" / "node_0"
    (argv,) = [json.loads(line) for line in (tmp_path / "docker.jsonl").read_text().splitlines()]
    assert argv[:6] == ["exec", "trainer", "env", "RCCL_THREADS_PER_BLOCK=256",
                        "NCCL_MAX_NCHANNELS=28", "HSA_ENABLE_SDMA=0"]
    assert argv[6:12] == [str(STANDIN), "-i", str(GEMM_INPUT), "-d", str(trace_dir), "--"]
    assert argv[12] == "torchrun" and argv[-3:] == [
        "--override", "profiling.tensorboard=false", f"training.output_dir={out}"]
    # rocprofv3 applied the file: counters (pmc) put the CSVs in pass_1, with stats.
    assert list((trace_dir / "pass_1").rglob("*_kernel_stats.csv"))
    assert rocprof_metrics(trace_dir)["rocprof_kernel_count"] == 1
    assert len((out / "rank_01_metrics.jsonl").read_text().splitlines()) == 2


def test_local_launch_without_a_container_runs_here(tmp_path: Path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    done = local_launch(tmp_path, config, "true", "true")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "docker.jsonl").exists()
    out = tmp_path / "exp" / "256thread_28channels"
    assert list((out / "rocprof_traces" / "node_0").rglob("*_kernel_stats.csv"))  # --stats
    assert len((out / "rank_00_metrics.jsonl").read_text().splitlines()) == 2


def test_local_launch_says_in_one_line_when_the_container_is_not_running(tmp_path: Path):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_YAML)
    for env, state in (({"DOCKER_STANDIN_STOPPED": "trainer"}, "false"),
                       ({}, "no such container")):
        done = local_launch(tmp_path, config, DOCKER_CONTAINER="trainer", **env)
        assert done.returncode == 1
        assert done.stderr.splitlines() == [
            f"error: container trainer is not running (docker inspect: {state}); start it with "
            "docker start trainer, or leave DOCKER_CONTAINER empty to run here"]
        assert not (tmp_path / "docker.jsonl").exists() and not (tmp_path / "exp").exists()
