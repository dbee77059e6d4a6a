#!/usr/bin/env bash
# Issue 43's CPU proofs on the lent GPU machine's 16 cores, where 4 gloo ranks do not share 2
# cores (on the 2-core VM the what-if's clean step moved by a third between repeats, and 4 ranks
# there lent a sleeping rank's core to the others): the ranks' clock alignment on untouched and
# moved gloo traces (bench/proof_rank_alignment.py) and the what-if against clean runs
# (bench/proof_what_if.py), CUDA hidden. Each writes its one JSON line under $OUT.
#   OUT=<dir> [REPEATS=3] bash scripts/gpu/cpu_ranks_proof.sh
set -u
mkdir -p "$OUT"
source "$(dirname "$0")/setup.sh" > "$OUT/setup.log" 2>&1
nproc > "$OUT/cores.txt"
export CUDA_VISIBLE_DEVICES=
timeout 150 python3 bench/proof_rank_alignment.py --out /tmp/align --ranks 2 4 \
  > "$OUT/rank_alignment.json" 2> "$OUT/rank_alignment.err"; echo "alignment exit status $?"
timeout "${WHAT_IF_TIMEOUT:-400}" python3 bench/proof_what_if.py --out /tmp/what_if \
  --repeats "${REPEATS:-3}" --ranks 2 4 > "$OUT/what_if.json" 2> "$OUT/what_if.err"
echo "what-if exit status $?"
python3 - "$OUT" <<'PY'
import json, sys
for name in ("rank_alignment", "what_if"):
    try:
        found = json.loads(open(f"{sys.argv[1]}/{name}.json").read().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        print(name, "no result:", exc)
        continue
    print(name, json.dumps({k: v for k, v in found.items() if k not in ("runs", "clean")})[:1500])
PY
