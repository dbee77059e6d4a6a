#!/usr/bin/env bash
# GPU proof of the kernel-level compare (issue 42) on the lent GPU (setup.sh says how aorta is
# installed): bench/proof_kernel_compare.py with examples/reports/kernels/gemms.py under
# torchprof, each pair one order=rounds sweep of $TRIALS trials (default 10) a side: $AA A/A
# pairs (default 1) and up to $GROWN pairs (default 10) whose fp16 GEMM has 3 % more K; no new
# pair starts after $DEADLINE s (default 330: a device call runs at most 600 s). $KERNEL (default
# _hsh_, cuBLAS's fp16-in, fp32-accumulate, fp16-out GEMMs on sm90) names the grown GEMM. The
# deadline counts from the proof's start, which first compares $PRIOR's pairs again (~20 s each
# on an H100); a pair takes ~220-300 s, so PROOF_TIMEOUT must leave that after the deadline. Writes
# under $OUT (e.g. PRIOR=bench/gpu_evidence/h100-2026-12-07-kernel-compare/gemms-gpu-bound/runs.tgz
# GROWN=5 runs pairs 2-4 after comparing the 2 it holds):
#   proof.json   the proof's line (per pair: the grown GEMM's rows, every flagged row)
#   proof.err    its stderr
#   runs.tgz     every sweep's matrix.json/.parquet, cell.json, record.json, kernels.parquet:
#                unpacked, `python bench/proof_kernel_compare.py --out <dir> ...` compares again
#   nvidia-smi.txt, setup.log
set -u
mkdir -p "$OUT"
source "$(dirname "$0")/setup.sh" > "$OUT/setup.log" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
WORK=$(mktemp -d)
# Pairs accumulate across device calls: $PRIOR names earlier calls' runs.tgz (paths from the
# repository root, space-separated; made with this gemms.py); their sweeps are only compared,
# the next pairs run.
for prior in ${PRIOR:-}; do tar xzf "$prior" -C "$WORK"; done
timeout "${PROOF_TIMEOUT:-470}" python3 bench/proof_kernel_compare.py --out "$WORK" \
  --pairs "${AA:-1}" --grown-pairs "${GROWN:-10}" --trials "${TRIALS:-10}" \
  --payload examples/reports/kernels/gemms.py --grow GROW=1.03 --kernel "${KERNEL:-_hsh_}" \
  --deadline "${DEADLINE:-330}" > "$OUT/proof.json" 2> "$OUT/proof.err"
echo "proof exit status $?"
(cd "$WORK" && find . \( -name 'matrix.*' -o -name cell.json -o -name record.json \
  -o -name kernels.parquet -o -name '*.pt.trace.json' \) -print0 | tar czf "$OUT/runs.tgz" --null -T -)
python3 - "$WORK" <<'PY'
import glob, sys
import polars as pl
for path in sorted(glob.glob(f"{sys.argv[1]}/grown0/cells/*/trial_000/kernels.parquet")):
    print(path.split("/cells/")[1])
    print(pl.read_parquet(path).sort("total_ms", descending=True).head(6)
          .select("name", "calls", "total_ms"))
PY
ls -la "$OUT"
