#!/usr/bin/env bash
# Do the profilers agree on this machine? matmul.py (3 warm-up + 50 bf16 8192³ matmuls, timed by
# itself) bare and under every installed collector that can attach, 5 interleaved rounds; then
# the verdicts, agreement.json and report.html. Needs a GPU. Extra overrides pass through:
#   examples/profiling/agree/run.sh /tmp/agree trials=3 'agree.collectors=[torchprof,proton]'
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=$(realpath -m "${1:-/tmp/aorta_agree_example}")
shift $(( $# > 0 ? 1 : 0 ))
cd "$root"
python -m aorta_core sweep=agree output="$out" "$@" -- python examples/profiling/agree/matmul.py
echo "verdicts: $out/agreement.json; page: $out/report.html (Agreement section)"
