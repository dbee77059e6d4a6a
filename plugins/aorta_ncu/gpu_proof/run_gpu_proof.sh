#!/usr/bin/env bash
# GPU proof of the aorta-ncu collector (NVIDIA GPU, ncu, aorta-core and aorta-ncu installed in
# $PYTHON; torch and triton for the payloads). Runs real sweeps through the core CLI: the example
# sweep (examples/profiling/ncu/run.sh), then one sweep per option family and failure case, and
# check_proof.py on the result (its verdicts are in the log).
# Writes to $OUT (5 files): ncu_proof.log, matrix.json and the two raw.csv of trial 0 of the
# example sweep, and ncu_proof.tar.gz (every record, raw.csv, console.txt, matrix.json, perf.md
# and the .ncu-rep files under 8 MB).
#
#   OUT=/tmp/out bash plugins/aorta_ncu/gpu_proof/run_gpu_proof.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
EXAMPLES="$ROOT/examples/profiling/ncu"
PYTHON=${PYTHON:-python3}
OUT=${OUT:?set OUT to the folder that receives the proof files}
WORK=$(mktemp -d /tmp/ncu_proof.XXXXXX)
LOG="$OUT/ncu_proof.log"
mkdir -p "$OUT"
: > "$LOG"
export PATH="$(dirname "$(command -v "$PYTHON")"):$PATH"  # run.sh and the recipe call `python`

say() { echo "== $*" | tee -a "$LOG"; }

# What each sweep recorded: verdicts, exit codes, errors, warnings and the ncu metrics of trial 0.
show() {
  "$PYTHON" - "$1" >> "$LOG" 2>&1 <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("cells/*/trial_*/record.json")):
    r = json.loads(path.read_text())
    print(f"   {path.parent.parent.name}/{path.parent.name}: {r['verdict']} exit {r['exit_code']}"
          f" error {r['error']!r} wall {r['wall_time_s']} s")
    for w in r["warnings"].get("ncu", []):
        print(f"     warning: {w}")
    if path.parent.name == "trial_000":
        print("     argv_run:", " ".join(r["argv_run"]))
        for k, v in sorted(r["metrics"].items()):
            print(f"     {k} = {v}")
PY
}

# sweep NAME [overrides...] -- command...
sweep() {
  local name=$1; shift
  local overrides=()
  while [ "$1" != "--" ]; do overrides+=("$1"); shift; done
  shift
  say "sweep $name: ${overrides[*]} -- $*"
  local start=$SECONDS
  (cd "$ROOT" && timeout 570 "$PYTHON" -m aorta_core sweep=repeat collector=ncu trials=1 \
     timeout=540 output="$WORK/$name" "${overrides[@]}" -- "$@") >> "$LOG" 2>&1
  echo "   exit $? after $((SECONDS - start)) s" | tee -a "$LOG"
  show "$WORK/$name"
}

say "host: $(hostname)  $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
ncu --version >> "$LOG" 2>&1
grep -H RmProfilingAdminOnly /proc/driver/nvidia/params >> "$LOG" 2>&1
"$PYTHON" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" >> "$LOG" 2>&1
"$PYTHON" -m aorta_core plugins >> "$LOG" 2>&1

say "example sweep: examples/profiling/ncu/run.sh (2 payloads x 2 trials, defaults)"
start=$SECONDS
timeout 1200 bash "$EXAMPLES/run.sh" "$WORK/examples" timeout=540 >> "$LOG" 2>&1
echo "   exit $? after $((SECONDS - start)) s" | tee -a "$LOG"
show "$WORK/examples"

MATMUL="$EXAMPLES/matmul.py"
SOFTMAX="$EXAMPLES/triton_softmax.py"
sweep detailed collector.ncu.set=detailed -- "$PYTHON" "$MATMUL" --size 4096 --iters 2
sweep sections 'collector.ncu.set=[SpeedOfLight,Occupancy]' \
  'collector.ncu.metrics=[dram__bytes_read.sum]' -- "$PYTHON" "$MATMUL" --size 2048 --iters 2
sweep filtered collector.ncu.kernel_regex=softmax collector.ncu.launch_skip=1 \
  collector.ncu.launch_count=1 collector.ncu.clock_control=none collector.ncu.cache_control=none \
  -- "$PYTHON" "$SOFTMAX" --iters 3
sweep torchrun -- "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=1 \
  "$MATMUL" --size 2048 --iters 2
sweep app_replay collector.ncu.replay_mode=application -- "$PYTHON" "$MATMUL" --size 2048 --iters 2
sweep no_kernels -- "$PYTHON" -c "print('no gpu work')"
sweep exit3 -- "$PYTHON" -c "import torch; torch.ones(4, device='cuda').sum().item(); raise SystemExit(3)"
sweep missing_ncu collector.ncu.ncu_bin=/nonexistent/ncu -- "$PYTHON" "$MATMUL"

say "aorta parse of the first example trial"
first=$(ls -d "$WORK"/examples/cells/*payload=matmul*/trial_000/ncu 2>/dev/null | head -1)
[ -n "$first" ] && "$PYTHON" -m aorta_core parse ncu "$first" >> "$LOG" 2>&1

say "check_proof.py"
"$PYTHON" "$HERE/check_proof.py" "$WORK" 2>&1 | tee -a "$LOG"

cp "$WORK/examples/matrix.json" "$OUT/matrix.json" 2>> "$LOG"
for payload in matmul triton_softmax; do
  cp "$WORK"/examples/cells/*payload=$payload/trial_000/ncu/raw.csv "$OUT/$payload.raw.csv" 2>> "$LOG"
done
(cd "$WORK" && find . \( -name record.json -o -name raw.csv -o -name console.txt \
   -o -name matrix.json -o -name perf.md -o -name stdout.log -o -name stderr.log \
   -o -name '*.ncu-rep' \) -size -8M -print0 | tar --null -czf "$OUT/ncu_proof.tar.gz" -T -)
say "packed $(tar -tzf "$OUT/ncu_proof.tar.gz" | wc -l) files into ncu_proof.tar.gz; work in $WORK"
ls -la "$OUT" | tee -a "$LOG"
