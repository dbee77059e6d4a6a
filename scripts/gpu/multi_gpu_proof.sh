#!/usr/bin/env bash
# Issue 8: the built-in benchmark and the collectors on several GPUs of one host (H200 x2/x4/x8).
# Needs aorta-core and the aorta-torchprof / aorta-proton plugins installed in $PYTHON (see
# bench/gpu_evidence/h200-2026-12-02/README.md for the wheel-carrying install used on the lent
# machines). Writes $OUT/multi_gpu.log, $OUT/summary.json (scripts/gpu/multi_gpu_check.py) and
# $OUT/multi_gpu.tar.gz (matrices, records, per-rank JSONL, small traces).
#
#   OUT=/tmp/out bash scripts/gpu/multi_gpu_proof.sh
#   CPU_DRY_RUN=1 OUT=/tmp/out bash scripts/gpu/multi_gpu_proof.sh   # plumbing only: 2 gloo ranks
set -uo pipefail
OUT=${OUT:?set OUT to the folder that receives the results}
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/multi_gpu.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/multi_gpu.log") 2>&1
cd "$(dirname "$0")/../.."
# NVLink multicast stays off on the lent machines (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

if [ "${CPU_DRY_RUN:-0}" = 1 ]; then
  gpus=2; sizes="1 2"
  bench=(device=cpu model=tiny training.max_steps=6)
else
  gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())")
  [ "$gpus" -ge 2 ] || { echo "needs 2 or more GPUs, found $gpus"; exit 2; }
  sizes="1 2"; [ "$gpus" -gt 2 ] && sizes="$sizes $gpus"
  nvidia-smi topo -m || true
  bench=(device=cuda model=base training.mixed_precision=bf16 data.batch_size=8
         data.sequence_length=1024 training.max_steps=30 telemetry.summary_skip_steps=5)
fi
launch() { echo "$PY" -m torch.distributed.run --standalone "--nproc_per_node=$1" -m aorta_core.benchmark; }

echo "== 1. FSDP2 benchmark per world size: $sizes"
for n in $sizes; do
  timeout 600 "$PY" -m aorta_core sweep=repeat trials=2 output="$WORK/world_$n" \
    -- $(launch "$n") "${bench[@]}"
done

echo "== 2. torchprof (env mode) over the torchrun launch on $gpus ranks: one trace per rank"
timeout 600 "$PY" -m aorta_core sweep=repeat trials=2 collector=torchprof \
  collector.torchprof.mode=env collector.torchprof.wait=2 collector.torchprof.active=3 \
  output="$WORK/torchprof" -- $(launch "$gpus") "${bench[@]}" training.max_steps=12

echo "== 3. Proton (env mode) on rank 0 of the same job"
timeout 600 "$PY" -m aorta_core sweep=repeat trials=1 collector=proton collector.proton.mode=env \
  output="$WORK/proton" -- $(launch "$gpus") "${bench[@]}" training.max_steps=12

"$PY" scripts/gpu/multi_gpu_check.py "$WORK" "$gpus" > "$OUT/summary.json"
rc=$?
cat "$OUT/summary.json"
(cd "$WORK" && find . \( -name matrix.json -o -name perf.md -o -name record.json \
   -o -name 'rank_*_metrics.jsonl' -o -name '*.hatchet' -o \( -name '*.pt.trace.json*' -size -4M \) \) \
   -print0 | tar --null -czf "$OUT/multi_gpu.tar.gz" -T -)
exit $rc
