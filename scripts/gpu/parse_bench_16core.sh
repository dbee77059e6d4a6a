#!/usr/bin/env bash
# Issue 17 on the lent H200 machine's 16 cores (CPU work only, no GPU is used): eight rank
# traces of ~160 MB (550k events each, as bench/bench_torchprof_parse.py generates them) parsed
# by `parse_dir` in parallel worker processes vs one after another, interleaved, 3 times each.
# Target: parallel <= 0.2x sequential on 16 cores. About 60 s wall (generation ~10 s on 16 cores,
# 3 x (sequential ~5 s + parallel ~1 s), start-up). EVENTS=<n> makes the traces smaller.
# Needs aorta-core and aorta-torchprof installed (pip install -e . -e plugins/aorta_torchprof).
# Writes under $OUT:
#   parse_bench_16core.json   the bench's summary (parallel_vs_sequential, peaks, cores)
#   parse_bench_16core.log    everything printed
set -euo pipefail
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
EVENTS="${EVENTS:-550000}"
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/parse_bench_16core.log") 2>&1
"$PY" -c "import aorta_core.api.parallel, aorta_torchprof.parse, os; print('cores', len(os.sched_getaffinity(0)))"
timeout 300 "$PY" bench/bench_parallel_parse.py --ranks 8 --events "$EVENTS" --repeat 3 \
  | tee "$OUT/bench.out"
tail -n 1 "$OUT/bench.out" > "$OUT/parse_bench_16core.json"
rm "$OUT/bench.out"
echo "wrote $OUT/parse_bench_16core.json"
