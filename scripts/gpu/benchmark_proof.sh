#!/usr/bin/env bash
# GPU proof of the built-in benchmark (issue 6) on one NVIDIA GPU (H200, torch 2.11 + CUDA).
# Needs aorta-core installed (pip install -e . plus hydra-core and msgspec; nvidia-ml-py for
# the gpu fields). Writes at most 6 files under $OUT:
#   proof.log           everything printed, in order
#   bench_summary.json  matmul rate, compute-stream fraction, telemetry on/off (bench/bench_benchmark_gpu.py)
#   runs.log            the benchmark runs' own output
#   telemetry_run.jsonl rank 0 JSONL of a bf16 run with telemetry + GPU diagnostics
#   benchmark_runs.tar.gz  all run folders (JSONL, config, profiler traces, metrics)
#   nvidia-smi.txt      the GPU and driver
set -euo pipefail
OUT="${OUT:?set OUT to the output folder}"
WORK="${WORK:-$(mktemp -d)}"
PY="${PYTHON:-python}"
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/proof.log") 2>&1
cd "$(dirname "$0")/../.."

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
"$PY" -c "import torch, hydra, msgspec, aorta_core.benchmark; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" \
  || { echo "install aorta-core and its dependencies first (pip install -e . --no-deps + hydra-core msgspec)"; exit 1; }

echo "== 1. telemetry run: bf16, GPU diagnostics, profiler block (2 traced steps)"
timeout 600 "$PY" -m aorta_core.benchmark device=cuda model=base training.mixed_precision=bf16 \
  data.batch_size=8 data.sequence_length=1024 data.num_samples=1000000 training.max_steps=20 \
  telemetry.gpu_diagnostics=true profiling.enabled=true profiling.wait=5 profiling.warmup=2 \
  profiling.active=2 profiling.record_shapes=false profiling.gzip=true output_dir="$WORK/telemetry_run"
cp "$WORK/telemetry_run/rank_00_metrics.jsonl" "$OUT/telemetry_run.jsonl"

echo "== 2. speed: matmul rate, compute-stream fraction, telemetry on vs off"
timeout 1200 "$PY" bench/bench_benchmark_gpu.py --work "$WORK/bench" --out "$OUT/bench_summary.json" --pairs 3
cp "$WORK/bench/runs.log" "$OUT/runs.log"

echo "== 3. schema check of every JSONL line"
"$PY" - "$WORK" <<'PYEOF'
import pathlib, sys
from aorta_core.benchmark.schema import decode_line
n = 0
for path in pathlib.Path(sys.argv[1]).rglob("rank_*_metrics.jsonl"):
    for line in path.read_bytes().splitlines():
        decode_line(line); n += 1
print(f"{n} records valid")
PYEOF

tar czf "$OUT/benchmark_runs.tar.gz" -C "$WORK" telemetry_run bench
ls -la "$OUT"
