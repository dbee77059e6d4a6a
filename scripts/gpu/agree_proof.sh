#!/usr/bin/env bash
# GPU evidence of sweep=agree (issue 15): examples/profiling/agree/matmul.py (3 warm-up + 50 bf16
# 8192³ matmuls, timed by itself with CUDA events) bare and under every collector that attaches
# (torchprof, proton and ncu on an NVIDIA GPU; rocprof is left out there), $TRIALS interleaved
# rounds (default 5), each trial at most $TRIAL_TIMEOUT s (default 240: a stuck profiler is a
# failed first trial, and auto mode then leaves that collector out). Needs aorta-core,
# aorta-torchprof, aorta-proton and aorta-ncu installed, ncu on PATH (or NCU_BIN) and OUT set.
# Extra overrides pass through to the sweep, e.g. '+agree.options.ncu={clock_control:none}' where
# ncu cannot lock the clocks. Writes under $OUT (7 files, no folder):
#   agree_proof.log  everything printed, in order: versions, the sweep, the verdict table
#   agreement.json   the verdicts (docs/reports.md, "agreement.json")
#   matrix.json      the sweep's matrix; perf.md its medians
#   records.tar.gz   every cells/*/cell.json and trial record.json: `aorta matrix <folder>` on
#                    the unpacked folder rebuilds the matrix, agreement.json and report.html
#   plugins.json     aorta plugins --json
#   nvidia-smi.txt   the GPU and driver
set -euo pipefail
OUT="${OUT:?set OUT to the output folder}"
WORK="${WORK:-$(mktemp -d)}"
PY="${PYTHON:-python}"
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/agree_proof.log") 2>&1
cd "$(dirname "$0")/../.."
export AORTA_REPORT_PNG=0

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
"${NCU_BIN:-ncu}" --version 2>&1 | tail -1 || echo "no ncu: its cell will be left out"
"$PY" -m aorta_core plugins --json > "$OUT/plugins.json"

echo "== sweep=agree, ${TRIALS:-5} rounds"
status=0
"$PY" -m aorta_core sweep=agree trials="${TRIALS:-5}" timeout="${TRIAL_TIMEOUT:-240}" \
  output="$WORK/agree" "$@" -- "$PY" "${PAYLOAD:-examples/profiling/agree/matmul.py}" || status=$?
echo "sweep exit status $status"

echo "== aorta agree (rebuilds agreement.json and report.html from the records)"
"$PY" -m aorta_core agree "$WORK/agree"
cp "$WORK/agree/agreement.json" "$WORK/agree/matrix.json" "$WORK/agree/perf.md" "$OUT/"
(cd "$WORK/agree" && tar czf "$OUT/records.tar.gz" cells/*/cell.json cells/*/trial_*/record.json)
ls -la "$OUT"
