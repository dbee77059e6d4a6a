"""GPU speed check of the built-in benchmark (issue 6): run on one CUDA GPU.

In one invocation it measures
  1. the GPU's dense bf16 matmul rate (square GEMMs, CUDA-event timed, best of several sizes);
  2. the benchmark (bf16, telemetry on) and its compute-stream TFLOP/s as a fraction of (1);
  3. telemetry on vs off: wall time per step over the measured steps, runs interleaved
     (on, off, on, off, ...) so clock drift hits both sides alike.
Targets (issue 6): compute stream >= 50 % of the matmul rate; telemetry costs <= 2 % step time.
Prints a table and one JSON line, and writes the summary JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE = ["device=cuda", "model=base", "training.mixed_precision=bf16", "data.batch_size=8",
        "data.sequence_length=1024", "data.num_samples=1000000", "training.max_steps=40",
        "telemetry.summary_skip_steps=10",
        "training.log_interval=10"]


def run_benchmark(out_dir: Path, overrides: list[str], log) -> dict:
    metrics_path = out_dir / "metrics.json"
    env = {**os.environ, "AORTA_METRICS_PATH": str(metrics_path)}
    cmd = [sys.executable, "-m", "aorta_core.benchmark", *overrides, f"output_dir={out_dir}"]
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark run failed (exit {proc.returncode}); see the log")
    metrics = json.loads(metrics_path.read_text())
    metrics["process_s"] = time.perf_counter() - t0
    return metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the runs")
    parser.add_argument("--out", type=Path, required=True, help="summary JSON path")
    parser.add_argument("--pairs", type=int, default=3, help="telemetry on/off run pairs")
    parser.add_argument("overrides", nargs="*", help="extra benchmark overrides")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    overrides = BASE + args.overrides
    import torch

    from aorta_core.benchmark.peak import matmul_rate_tflops

    matmul = matmul_rate_tflops(torch.device("cuda"), torch.bfloat16, (4096, 8192, 16384), 30)
    print(f"bf16 matmul rate: {matmul['tflops']:.1f} TFLOP/s (n={matmul['n']})", flush=True)
    on, off = [], []
    with (args.work / "runs.log").open("w") as log:
        for i in range(args.pairs):
            on.append(run_benchmark(args.work / f"on_{i}", overrides, log))
            off.append(run_benchmark(args.work / f"off_{i}", [*overrides,
                                                               "telemetry.enabled=false"], log))
            print(f"pair {i}: on {on[-1]['wall_ms_per_step']:.2f} ms/step, "
                  f"off {off[-1]['wall_ms_per_step']:.2f} ms/step", flush=True)
    compute_tflops = statistics.median(m["compute_tflops"] for m in on)
    wall_on = statistics.median(m["wall_ms_per_step"] for m in on)
    wall_off = statistics.median(m["wall_ms_per_step"] for m in off)
    summary = {
        "matmul_bf16_tflops": matmul["tflops"], "matmul_n": matmul["n"],
        "compute_stream_tflops": compute_tflops,
        "compute_fraction_of_matmul": compute_tflops / matmul["tflops"],
        "step_tflops": statistics.median(m["tflops"] for m in on),
        "step_time_ms_on": statistics.median(m["step_time_ms"] for m in on),
        "step_time_ms_off": statistics.median(m["step_time_ms"] for m in off),
        "wall_ms_per_step_on": wall_on, "wall_ms_per_step_off": wall_off,
        "telemetry_overhead": wall_on / wall_off - 1.0,
        "overlap_ratio": statistics.median(m.get("overlap_ratio", float("nan")) for m in on),
        "overrides": overrides, "runs_on": on, "runs_off": off,
    }
    summary["pass_compute_50pct"] = summary["compute_fraction_of_matmul"] >= 0.5
    summary["pass_overhead_2pct"] = summary["telemetry_overhead"] <= 0.02
    args.out.write_text(json.dumps(summary, indent=2))
    rows = [("bf16 matmul rate", f"{matmul['tflops']:.1f} TFLOP/s"),
            ("compute-stream rate", f"{compute_tflops:.1f} TFLOP/s"),
            ("fraction of matmul", f"{summary['compute_fraction_of_matmul']:.1%} (target >= 50%)"),
            ("wall/step telemetry on", f"{wall_on:.2f} ms"),
            ("wall/step telemetry off", f"{wall_off:.2f} ms"),
            ("telemetry overhead", f"{summary['telemetry_overhead']:+.2%} (target <= 2%)")]
    for name, value in rows:
        print(f"{name:<26} {value}")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("runs_on", "runs_off")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
