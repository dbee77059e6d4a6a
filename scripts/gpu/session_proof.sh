#!/usr/bin/env bash
# Every GPU proof of one session in one device call, each step bounded so the call ends inside
# the device's 10-minute limit (the steps are ordered by what matters most):
#   1. README command 1 exactly as written, from a user's folder   (scripts/gpu/readme_command1.sh)
#   2. sweep=agree of the issue's matmul payload, 3 rounds          (scripts/gpu/agree_proof.sh)
#   3. the Nsight Compute example sweep                             (examples/profiling/ncu/run.sh)
#   4. the 8-rank parallel trace-parse bench on 16 cores             (scripts/gpu/parse_bench_16core.sh)
# STEPS="1 3 4" runs only those (default: all four), so the steps can be split over two calls.
# Before them: where `python -m aorta_core` finds its package and its Hydra tree from the
# checkout (the case a developer meets) and from a user's folder.
# Needs the carried dependencies unpacked into $SITE (on PYTHONPATH); installs aorta and the four
# collectors from this checkout into it. Writes $OUT/<step>/... (at most 8 files in all).
set -u
OUT=${OUT:?set OUT}; SITE=${SITE:?set SITE}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 AORTA_REPORT_PNG=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
W=$(mktemp -d /tmp/session.XXXXXX)
mkdir -p "$OUT"
"$PY" -m pip install -q --no-deps --target "$SITE" .carry/*.whl 2>&1 | grep -v WARNING
"$PY" -m pip install -q --no-deps --no-build-isolation --target "$SITE" . plugins/aorta_*/ 2>&1 \
  | grep -v WARNING
exec > >(tee "$OUT/session.log") 2>&1
begin=$SECONDS
STEPS=${STEPS:-1 2 3 4}
step() { echo; echo "== $1 (t=$((SECONDS - begin)) s, limit $2 s)"; }
wanted() { [[ " $STEPS " == *" $1 "* ]]; }

step "0 where aorta_core and its Hydra tree come from" 30
"$PY" --version
where='import sys, aorta_core, aorta_core.conf as c; print(aorta_core.__file__, list(c.__path__), sys.path[:2])'
"$PY" -c "$where"; (cd "$W" && "$PY" -c "$where")
"$PY" -m aorta_core plugins 2>&1 | tail -6
timeout 30 "$PY" -m aorta_core sweep=repeat trials=1 output="$W/conf_check" -- true > "$W/conf_check.log" 2>&1
echo "sweep from the checkout: exit $?"; tail -3 "$W/conf_check.log"

if wanted 1; then
step "1 README command 1" 190
OUT="$W/readme" timeout 190 bash scripts/gpu/readme_command1.sh; echo "step 1 exit $?"
fi

if wanted 2; then
step "2 sweep=agree" ${AGREE_LIMIT:-190}
mkdir -p "$W/agree"
OUT="$W/agree" WORK="$W/agreework" TRIALS=${AGREE_TRIALS:-2} TRIAL_TIMEOUT=60 PYTHON="$PY" \
  timeout "${AGREE_LIMIT:-190}" bash scripts/gpu/agree_proof.sh > /dev/null 2>&1; echo "step 2 exit $?"
if [ ! -f "$W/agree/agreement.json" ]; then  # cut short: rebuild from the records it has
  "$PY" -m aorta_core matrix "$W/agreework/agree" > /dev/null 2>&1
  cp "$W/agreework/agree/agreement.json" "$W/agreework/agree/matrix.json" "$W/agree/" 2>/dev/null
fi
tail -25 "$W/agree/agree_proof.log"
fi

if wanted 3; then
step "3 ncu example" 110
PATH="$(dirname "$(command -v "$PY")"):$PATH" timeout 110 bash examples/profiling/ncu/run.sh \
  "$W/ncu_example" trials=1 > "$W/ncu_example.log" 2>&1; echo "step 3 exit $?"
tail -8 "$W/ncu_example.log"
fi

if wanted 4; then
step "4 parallel parse bench" ${PARSE_LIMIT:-70}
mkdir -p "$W/parse"
OUT="$W/parse" EVENTS=${PARSE_EVENTS:-300000} timeout "${PARSE_LIMIT:-70}" bash scripts/gpu/parse_bench_16core.sh \
  > "$W/parse.log" 2>&1; echo "step 4 exit $?"; tail -5 "$W/parse.log"
fi

echo; echo "== packing after $((SECONDS - begin)) s"
cp "$W/readme/readme1.log" "$OUT/" 2>/dev/null
tar czf "$OUT/evidence.tar.gz" -C "$W" --exclude='*.ncu-rep' --exclude='*.pt.trace.json*' \
  --exclude='*.hatchet' conf_check.log \
  $(cd "$W" && ls -d readme agree ncu_example.log parse parse.log 2>/dev/null) \
  $(cd "$W" && ls -d ncu_example/matrix.json ncu_example/cells/*/trial_000/ncu/raw.csv 2>/dev/null)
ls -la "$OUT"
