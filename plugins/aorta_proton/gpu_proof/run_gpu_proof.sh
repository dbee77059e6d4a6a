#!/usr/bin/env bash
# GPU proof of the aorta-proton collector (NVIDIA + Triton >= 3.6, aorta-core and aorta-proton
# installed in $PYTHON). Runs real sweeps through the core CLI, then packs every profile, record,
# matrix.json and perf.md into $OUT/proton_proof.tar.gz and writes $OUT/proton_proof.log.
#
#   OUT=/tmp/out bash plugins/aorta_proton/gpu_proof/run_gpu_proof.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
EXAMPLES=$(cd "$HERE/../../../examples/profiling/proton" && pwd)
LOOP=$(cd "$HERE/../../../examples/payload" && pwd)/train.py
PYTHON=${PYTHON:-python3}
OUT=${OUT:?set OUT to the folder that receives proton_proof.tar.gz and proton_proof.log}
WORK=$(mktemp -d /tmp/proton_proof.XXXXXX)
LOG="$OUT/proton_proof.log"
mkdir -p "$OUT"
: > "$LOG"

say() { echo "== $*" | tee -a "$LOG"; }

say "host: $(hostname)  $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
"$PYTHON" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" >> "$LOG" 2>&1
"$PYTHON" -m aorta_core plugins >> "$LOG" 2>&1

# sweep NAME TRIALS [overrides...] -- command...
sweep() {
  local name=$1 trials=$2; shift 2
  local overrides=()
  while [ "$1" != "--" ]; do overrides+=("$1"); shift; done
  shift
  say "sweep $name: ${overrides[*]} -- $*"
  local start=$SECONDS
  (cd "$HERE" && timeout 420 "$PYTHON" -m aorta_core sweep=repeat collector=proton \
     trials="$trials" timeout=180 output="$WORK/$name" "${overrides[@]}" -- "$@") >> "$LOG" 2>&1
  echo "   exit $? after $((SECONDS - start)) s" | tee -a "$LOG"
}

VECADD="$EXAMPLES/kernel_time/vecadd.py"
sweep cupti_auto 3 -- "$PYTHON" "$VECADD"
sweep cupti_pcsampling 1 collector.proton.backend=cupti collector.proton.backend_mode=pcsampling \
  -- "$PYTHON" "$VECADD"
sweep instrumentation 2 collector.proton.backend=instrumentation \
  -- "$PYTHON" "$EXAMPLES/intra_kernel/gluon_scopes.py"
sweep env_mode 2 collector.proton.mode=env -- "$PYTHON" "$EXAMPLES/env_mode/train_step.py"
# Env mode through aorta_core.payload.session: a plain loop with its two lines, and the built-in
# benchmark (its workload command, one rank), neither naming Proton in its code.
sweep env_loop 2 collector.proton.mode=env -- "$PYTHON" "$LOOP" --steps 10 --width 1024
say "sweep env_benchmark: workload=benchmark, 1 rank, model=small, 10 steps, bf16"
start=$SECONDS
(cd "$HERE" && timeout 420 "$PYTHON" -m aorta_core sweep=repeat collector=proton \
   collector.proton.mode=env trials=2 timeout=300 output="$WORK/env_benchmark" \
   workload=benchmark workload.nproc=1 workload.model=small workload.steps=10 \
   workload.precision=bf16) >> "$LOG" 2>&1
echo "   exit $? after $((SECONDS - start)) s" | tee -a "$LOG"
sweep trace 1 collector.proton.data=trace -- "$PYTHON" "$VECADD"
sweep python_context_hook 1 collector.proton.context=python collector.proton.hook=triton \
  -- "$PYTHON" "$VECADD"
sweep system_exit 1 -- "$PYTHON" system_exit.py
sweep pytest_failing 1 -- "$PYTHON" -m pytest -q -p no:cacheprovider gpu_cases_failing.py
sweep no_kernel 1 -- "$PYTHON" no_kernel.py

# The same pitfalls under Proton's own CLI, for the record (what aorta's runner fixes).
for case in system_exit.py "pytest -q -p no:cacheprovider gpu_cases_failing.py"; do
  dir="$WORK/native/$(echo "$case" | cut -d' ' -f1 | tr -c 'a-z_\n' '_')"
  mkdir -p "$dir"
  say "native proton CLI: $case"
  # shellcheck disable=SC2086
  (cd "$HERE" && timeout 300 "$PYTHON" -m triton.profiler.proton -n "$dir/proton" $case) >> "$LOG" 2>&1
  echo "   exit $?; files: $(ls "$dir" | tr '\n' ' ')" | tee -a "$LOG"
done
say "native proton CLI, -n folder missing"
(cd "$HERE" && timeout 300 "$PYTHON" -m triton.profiler.proton -n "$WORK/native/absent/proton" "$VECADD") >> "$LOG" 2>&1
echo "   exit $?; folder exists: $([ -d "$WORK/native/absent" ] && echo yes || echo no)" | tee -a "$LOG"

say "check_proof.py"
"$PYTHON" "$HERE/check_proof.py" "$WORK" 2>&1 | tee -a "$LOG"

# Pack: profiles, records, matrices, perf.md, stderr of failing trials (paths relative to $WORK).
(cd "$WORK" && find . \( -name '*.hatchet' -o -name '*.chrome_trace' -o -name record.json \
   -o -name matrix.json -o -name perf.md -o -name stderr.log -o -name stdout.log \) -size -8M \
   -print0 | tar --null -czf "$OUT/proton_proof.tar.gz" -T -)
say "packed $(tar -tzf "$OUT/proton_proof.tar.gz" | wc -l) files into proton_proof.tar.gz"
