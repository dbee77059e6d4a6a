#!/usr/bin/env bash
# Three trials of matmul.py under rocprofv3, kernel + memory-copy traces, summary in msec.
# On a machine without ROCm, try the flow with the test stand-in (it measures nothing):
#   ROCPROF_BIN=plugins/aorta_rocprof/tests/standin/rocprofv3 examples/profiling/rocprof/run.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-/tmp/aorta_rocprof_example}
python -m aorta_core sweep=repeat collector=rocprof trials=3 output="$out" \
  'collector.rocprof.trace=[kernel,memory_copy]' collector.rocprof.summary_units=msec \
  -- python "$here/matmul.py"
python -m json.tool "$out/matrix.json" | grep -A6 '"rocprof_gpu_time_ms"' || true
echo "artifacts: $out/cells/*/trial_*/rocprof/"
