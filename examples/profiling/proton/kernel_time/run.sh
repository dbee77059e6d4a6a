#!/usr/bin/env bash
# Kernel time per launch site (cupti on NVIDIA, roctracer/rocprofiler on AMD), mode: cli.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUTPUT=${OUTPUT:-runs/proton_kernel_time}
python -m aorta_core sweep=repeat collector=proton trials=3 output="$OUTPUT" \
  -- python "$HERE/vecadd.py"
python "$HERE/../check_matrix.py" "$OUTPUT" proton_kernel_count proton_gpu_time_ms proton_top_kernel_ms
