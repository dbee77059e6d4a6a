#!/usr/bin/env bash
# Issues 25 and 27 on the lent H200 machine's 16 cores (CPU work only, no GPU is used):
# - bench/bench_ranks.py on 8 ranks of ~150 MB (TILES=20): `aorta diagnose` against the parallel
#   `aorta parse torchprof` of the same traces (<= 1.5x), 8 ranks parallel vs sequential (<= 0.2x),
#   and the parse/overlap/timeline/diagnose walls and peaks of that capture;
# - bench/bench_startup.py: `aorta parse torchprof` of a near-empty trace vs `import aorta_core`.
# About 200 s (two generated captures of 1.2 GB, 3 rounds of parse/diagnose). Set up by setup.sh.
#   OUT=<dir> bash scripts/gpu/ranks_bench_16core.sh
# Writes under $OUT: ranks.json, startup.json (each bench's summary line) and bench.log.
set -uo pipefail
source "$(dirname "$0")/setup.sh"
TILES="${TILES:-20}"
RANKS="${RANKS:-8}"
exec > >(tee "$OUT/bench.log") 2>&1
cd bench
python3 bench_startup.py --repeat 9 | tail -n 1 > "$OUT/startup.json"
python3 bench_ranks.py --ranks "$RANKS" --tiles "$TILES" --eight | tail -n 1 > "$OUT/ranks.json"
cat "$OUT/startup.json" "$OUT/ranks.json"
