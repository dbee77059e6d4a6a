#!/usr/bin/env bash
# Capture-only (the older route): run the built-in benchmark under rocprofv3 and keep the traces.
# It parses nothing; for metrics in the sweep matrix use the collector instead:
#   python -m aorta_core sweep=repeat collector=rocprof -- torchrun ... -m aorta_core.benchmark
# (docs/collectors/rocprof.md, docs/legacy-rocprof-scripts.md).
#
# Usage: scripts/rocprof_capture.sh <config.yaml> [hydra overrides...] [--override key=value ...]
#   e.g. bash scripts/rocprof_capture.sh config/default.yaml --override training.max_steps=50
#   ROCPROF_OUTPUT_DIR  where run folders go (default: <repo>/rocprof_traces)
#   ROCPROF_ARGS        rocprofv3 flags (default: --kernel-trace --stats --output-format csv)
#   ROCPROF_BIN         rocprofv3 to use (default: rocprofv3 on PATH)
#   NPROC               ranks for torchrun (default: number of visible GPUs, at least 1)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 <config.yaml> [hydra overrides...] [--override key=value ...]" >&2
  exit 1
fi
config=$1
shift
if [[ ! -f $config ]]; then
  echo "error: config $config not found; give a benchmark config YAML" >&2
  exit 1
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rocprof=${ROCPROF_BIN:-rocprofv3}
if ! command -v "$rocprof" >/dev/null 2>&1; then
  echo "error: $rocprof not found; install ROCm's rocprofiler-sdk or set ROCPROF_BIN" >&2
  exit 1
fi

run_dir="${ROCPROF_OUTPUT_DIR:-$repo/rocprof_traces}/run_$(date +%Y%m%d_%H%M%S)"
mkdir -p "$run_dir"
read -r -a rocprof_args <<< "${ROCPROF_ARGS:---kernel-trace --stats --output-format csv}"

gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
nproc=${NPROC:-$(( gpus > 0 ? gpus : 1 ))}
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")

echo "rocprofv3 output: $run_dir"
# `--` always: rocprofv3's boolean flags take an optional value and would swallow the command.
exec "$rocprof" "${rocprof_args[@]}" -d "$run_dir" -- \
  torchrun --standalone --nproc_per_node "$nproc" -m aorta_core.benchmark \
  --config "$config" "$@"
