#!/usr/bin/env bash
# The payload starts Proton itself from AORTA_PROTON_* (mode: env); argv is left untouched.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUTPUT=${OUTPUT:-runs/proton_env_mode}
python -m aorta_core sweep=repeat collector=proton trials=2 output="$OUTPUT" \
  collector.proton.mode=env -- python "$HERE/train_step.py"
python "$HERE/../check_matrix.py" "$OUTPUT" proton_kernel_count proton_gpu_time_ms proton_top_kernel_ms
