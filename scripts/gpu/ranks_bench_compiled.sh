#!/usr/bin/env bash
# Issues 25 and 27 on the lent H200 host's 16 cores, as its image is and with bytecode cached.
# The image sets PYTHONDONTWRITEBYTECODE=1 and its site-packages hold no bytecode, so every
# command compiles what it imports (numpy alone: 0.27 s); a usual install has it cached. Runs
# bench_startup as the image is, then compiles the imported packages' bytecode (compileall; the
# machine is lent and bare, nothing of it is kept) and runs bench_startup and bench_ranks
# (8 ranks of ~145 MB: parallel vs sequential parse, diagnose vs parse) again; with RANKS64=1
# also bench_ranks on 64 ranks of ~100 MB (tiles 14, 6.5 GB; about 4 minutes more); with PIECES=1
# also bench_piece_size (one ~160 MB trace read in pieces of 128 KiB-16 MiB; about 1 minute).
#   OUT=<dir> [TILES=22] [RANKS64=1] [PIECES=1] bash scripts/gpu/ranks_bench_compiled.sh
# Writes under $OUT: startup_as_is.json, startup_compiled.json, ranks.json (8 ranks),
# ranks64.json, piece_size.json, lscpu.txt, bench.log.
set -uo pipefail
source "$(dirname "$0")/setup.sh"
exec > >(tee "$OUT/bench.log") 2>&1
lscpu > "$OUT/lscpu.txt"
cd bench
python3 bench_startup.py --repeat 9 | tail -n 1 > "$OUT/startup_as_is.json"
SITE_PACKAGES=$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
start=$(date +%s)
python3 -m compileall -q -j 16 -x 'site-packages/(torch|triton|nvidia|jax|tensorflow|sympy|scipy|cupy|numba)' \
  "$SITE_PACKAGES" /tmp/site312 > /dev/null
echo "compileall: $(( $(date +%s) - start )) s"
python3 bench_startup.py --repeat 9 | tail -n 1 > "$OUT/startup_compiled.json"
python3 bench_ranks.py --ranks 8 --tiles "${TILES:-20}" --eight | tail -n 1 > "$OUT/ranks.json"
cat "$OUT/startup_as_is.json" "$OUT/startup_compiled.json" "$OUT/ranks.json"
if [ "${PIECES:-0}" = 1 ]; then
  python3 bench_piece_size.py --repeat 3 | tail -n 1 > "$OUT/piece_size.json"
  cat "$OUT/piece_size.json"
fi
if [ "${RANKS64:-0}" = 1 ]; then
  python3 bench_ranks.py --ranks 64 --tiles 14 | tail -n 1 > "$OUT/ranks64.json"
  cat "$OUT/ranks64.json"
fi
