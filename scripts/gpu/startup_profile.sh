#!/usr/bin/env bash
# Where `aorta parse torchprof` of a near-empty trace spends its start-up on the lent machine
# (issue 27): -X importtime and cProfile of that command and of `import aorta_core`, the
# interpreter's own start, and the entry-point scan. Set up by setup.sh.
#   OUT=<dir> bash scripts/gpu/startup_profile.sh
# Writes under $OUT: importtime_parse.txt, importtime_core.txt, cprofile_parse.txt, walls.txt.
set -uo pipefail
source "$(dirname "$0")/setup.sh"
T=$(mktemp -d)
mkdir -p "$T/torchprof"
(cd bench && python3 -c "from bench_torchprof_parse import make_trace; import sys; from pathlib import Path; make_trace(Path(sys.argv[1]), 10)" "$T/torchprof/rank0.pt.trace.json")
cd "$T"
for i in 1 2 3; do python3 -m aorta_core parse torchprof "$T/torchprof" >/dev/null; done  # warm
python3 -X importtime -m aorta_core parse torchprof "$T/torchprof" 2> "$OUT/importtime_parse.txt" >/dev/null
python3 -X importtime -c "import aorta_core" 2> "$OUT/importtime_core.txt"
python3 -X importtime -c "pass" 2> "$OUT/importtime_bare.txt"
python3 -m cProfile -s cumtime -m aorta_core parse torchprof "$T/torchprof" > "$OUT/cprofile_parse.txt" 2>&1
{
  for c in "pass" "import aorta_core" "import numpy" "import msgspec" \
           "import importlib_metadata as m; m.entry_points(group='aorta.collectors')" \
           "import importlib.metadata as m; print(len(list(m.distributions())))"; do
    python3 -c 'import subprocess, sys, time; s = time.perf_counter(); subprocess.run([sys.executable, "-c", sys.argv[1]]); print(f"{time.perf_counter() - s:.3f} {sys.argv[1]}")' "$c"
  done
  for i in 1 2 3; do python3 -c 'import subprocess, sys, time; s = time.perf_counter(); subprocess.run([sys.executable, "-m", "aorta_core", "parse", "torchprof", sys.argv[1]], stdout=subprocess.DEVNULL); print(f"{time.perf_counter() - s:.3f} aorta parse")' "$T/torchprof"; done
  python3 -c "import sys; print(sys.path)"
  ls "$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"/*.pth
  nproc; cat /proc/loadavg
} > "$OUT/walls.txt" 2>&1
cat "$OUT/walls.txt"
