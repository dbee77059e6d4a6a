#!/usr/bin/env bash
# Both payloads (bf16 matmul, Triton softmax) under Nsight Compute, two trials each, then the
# kernel and hardware metrics of every cell from matrix.json. Needs an NVIDIA GPU, ncu (or
# NCU_BIN) and counter permission. Extra overrides pass through:
#   examples/profiling/ncu/run.sh /tmp/ncu_example collector.ncu.set=detailed
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=$(realpath -m "${1:-/tmp/aorta_ncu_example}")
shift $(( $# > 0 ? 1 : 0 ))
cd "$root"
python -m aorta_core --config-dir examples/profiling/ncu sweep=ncu_payloads collector=ncu \
  output="$out" "$@"
python - "$out/matrix.json" <<'PY'
import json, sys
for cell in json.load(open(sys.argv[1]))["cells"]:
    summary = cell["metrics_summary"]
    print(cell["axes"].get("payload"), cell["trials"],
          {k: round(v["median"], 4) for k, v in sorted(summary.items()) if k.startswith("ncu_")},
          cell["metrics_text"].get("ncu_top_kernels", [])[:1])
PY
echo "artifacts: $out/cells/*/trial_*/ncu/ (report.ncu-rep, raw.csv, console.txt)"
