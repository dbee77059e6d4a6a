#!/usr/bin/env bash
# GPU proof of the torchprof collector: real sweeps with collector=torchprof on CUDA.
# Needs: this repo installed (pip install -e . -e plugins/aorta_torchprof) with a CUDA torch.
# Writes at most 8 files under $OUT: torchprof_proof.tar.gz (traces, records, matrices) + logs.
set -uo pipefail
OUT=${OUT:-/tmp/torchprof_proof}
mkdir -p "$OUT"
work=$(mktemp -d)
log="$OUT/torchprof_proof.log"
train="examples/profiling/torchprof/train_tiny.py"
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
{
  python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  echo "gpus=$gpus"
  # 1 GPU: a single-process training script under the runner.
  python -m aorta_core sweep=repeat collector=torchprof trials=2 output="$work/single" \
    collector.torchprof.active=3 -- python "$train" --steps 12 --width 2048 --batch 256
  # >= 2 GPUs: every torchrun rank profiled, NCCL kernels give the comm/compute overlap.
  if [ "$gpus" -ge 2 ]; then
    python -m aorta_core sweep=repeat collector=torchprof trials=2 output="$work/torchrun" \
      collector.torchprof.active=3 -- torchrun --nproc-per-node 2 --standalone "$train" \
      --steps 12 --width 2048 --batch 256
  fi
  for m in "$work"/*/matrix.json; do echo "== $m"; python -m json.tool "$m"; done
  if python -c "import hta" 2>/dev/null; then
    for d in "$work"/*/cells/*/trial_000/torchprof; do
      echo "== HTA on $d"
      python - "$d" <<'PY'
import sys
from hta.trace_analysis import TraceAnalysis
for inc in (False, True):
    a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=inc)
    print("include_last_profiler_step", inc, a.get_comm_comp_overlap(visualize=False).to_dict("records"))
PY
    done
  fi
} >"$log" 2>&1
rc=$?
tar -czf "$OUT/torchprof_proof.tar.gz" -C "$work" .
echo "exit=$rc; traces, records and matrices in $OUT/torchprof_proof.tar.gz" >>"$log"
exit $rc
