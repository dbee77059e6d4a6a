#!/usr/bin/env bash
# Cycles per intra-kernel scope of a Gluon kernel (backend: instrumentation), mode: cli.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUTPUT=${OUTPUT:-runs/proton_intra_kernel}
python -m aorta_core sweep=repeat collector=proton trials=2 output="$OUTPUT" \
  collector.proton.backend=instrumentation -- python "$HERE/gluon_scopes.py"
python "$HERE/../check_matrix.py" "$OUTPUT" proton_scope_cycles proton_top_scope_cycles \
  proton_scope_load_share proton_scope_compute_share
