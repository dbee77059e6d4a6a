#!/usr/bin/env bash
# Raw material captured on the lent H200 (issues 12 and 16), kept as evidence and test fixtures:
#   - what torchrun prints when two NCCL ranks land on one GPU (the reason-extraction fixture);
#   - the wall time of the GPU-sized benchmark (the `auto` profile on a GPU);
#   - Nsight Compute: version, sets, sections, and raw-page CSVs of a torch matmul and a Triton
#     kernel (basic/detailed/full sets, base and auto units), under torchrun too, and the console
#     text of its failure cases.
# Needs aorta-core importable (PYTHONPATH) with hydra/msgspec; writes under $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/capture.XXXXXX)
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/capture.log") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
E=examples/profiling/ncu
{
  nvidia-smi; ncu --version; "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())"
  echo "== ncu --list-sets"; ncu --list-sets
  echo "== ncu --list-sections"; ncu --list-sections
  echo "== ncu --help"; ncu --help
} > "$OUT/ncu_env.txt" 2>&1

echo "== 1. two ranks on one GPU (README command 1 before nproc=auto)"
"$PY" -m torch.distributed.run --standalone --nproc_per_node=2 -m aorta_core.benchmark \
  training.max_steps=2 > "$W/dup_gpu.stdout" 2> "$W/dup_gpu.stderr"; echo "exit $?"

echo "== 2. GPU-sized benchmark wall time (1 rank, base model, bf16)"
for mode in fsdp ddp; do
  /usr/bin/time -f "$mode wall %e s" "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
    -m aorta_core.benchmark parallel=$mode model=base training.mixed_precision=bf16 data.batch_size=8 \
    data.sequence_length=1024 training.max_steps=20 output_dir=$W/bench_$mode 2>&1 | grep -E "benchmark done|wall"
done

echo "== 3. ncu captures"
run() { local name=$1; shift; echo "-- $name: ncu $*"; ( cd "$W" && ncu "$@" ) > "$W/$name.console" 2>&1; echo "exit $?"; tail -3 "$W/$name.console"; }
imp() { ncu --import "$W/$1.ncu-rep" --csv --page raw > "$W/$1.raw.csv" 2> "$W/$1.import.err";
        ncu --import "$W/$1.ncu-rep" --csv --page raw --print-units base > "$W/$1.raw_base.csv" 2>> "$W/$1.import.err";
        echo "$1: $(wc -l < "$W/$1.raw.csv") lines, $(head -1 "$W/$1.raw.csv" | tr ',' '\n' | wc -l) columns"; }
P=$(realpath "$E")
run mm_basic --target-processes all -f -o mm_basic --set basic -- "$PY" "$P/matmul.py" --size 4096 --iters 3; imp mm_basic
run mm_detailed --target-processes all -f -o mm_detailed --set detailed --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active -- "$PY" "$P/matmul.py" --size 4096 --iters 2; imp mm_detailed
run sm_full --target-processes all -f -o sm_full --set full -k regex:softmax -- "$PY" "$P/triton_softmax.py" --iters 2; imp sm_full
run sm_basic --target-processes all -f -o sm_basic --set basic --launch-skip 2 --launch-count 4 --clock-control none --cache-control none -- "$PY" "$P/triton_softmax.py" --iters 3; imp sm_basic
run tr_basic --target-processes all -f -o tr_basic --set basic -- "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 "$P/matmul.py" --size 2048 --iters 2; imp tr_basic
run mm_app --target-processes all -f -o mm_app --set basic --replay-mode application -- "$PY" "$P/matmul.py" --size 2048 --iters 2; imp mm_app
run fail_exit3 --target-processes all -f -o fail_exit3 -- "$PY" -c "import torch; torch.ones(4, device='cuda').sum().item(); raise SystemExit(3)"
run no_kernels --target-processes all -f -o no_kernels -- "$PY" -c "print('no gpu work')"
run missing_prog --target-processes all -f -o missing -- /nonexistent/program
run bad_set --set nope -f -o bad_set -- "$PY" -c "print(1)"
run range_mode --target-processes all -f -o range_mode --replay-mode range -- "$PY" "$P/matmul.py" --size 1024 --iters 1
ls -la "$W"
tar czf "$OUT/captures.tar.gz" -C "$W" --exclude='bench_*' .
ls -la "$OUT"
