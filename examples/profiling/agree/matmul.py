"""The payload of the agreement sweep: 3 warm-up + 50 bf16 8192³ matmuls that time themselves.

CUDA events time the products; both numbers go to ``$AORTA_METRICS_PATH`` (when aorta runs it),
so that ``sweep=agree`` has the payload's own clock as its reference column:

- ``gpu_time_ms``: all 53 (``workload_gpu_time_ms``, the default ``agree.reference``), the same
  work as a profiler's whole-run kernel total, which also counts the warm-up. The first product's
  own span cannot be bracketed: the host loads cuBLAS and the kernel while the GPU idles (on the
  H200 an event span from before it measured 154 ms for 53 products whose kernels sum to 78 ms).
  So the events start once it is queued, and the 53 are the 52 measured ones at their own rate;
- ``timed_gpu_time_ms``: the 50 after the warm-up, measured alone
  (``agree.reference=workload_timed_gpu_time_ms``).

    python examples/profiling/agree/matmul.py [--size 8192] [--warmup 3] [--iters 50]
"""

from __future__ import annotations

import argparse
import json
import os

import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    if args.warmup < 1 or args.iters < 1:
        parser.error("--warmup and --iters must be at least 1 (the first product loads cuBLAS)")
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU (torch sees none)")
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    first, warm, last = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    a @ b  # the first warm-up product: cuBLAS and its kernel load here, outside any span
    first.record()  # reached when that product ends: the GPU stays busy from here on
    for _ in range(args.warmup - 1):
        a @ b
    warm.record()
    for _ in range(args.iters):
        a @ b
    last.record()
    last.synchronize()
    measured = args.warmup - 1 + args.iters
    metrics = {"gpu_time_ms": first.elapsed_time(last) * (measured + 1) / measured,
               "timed_gpu_time_ms": warm.elapsed_time(last)}
    tflops = 2 * n**3 * args.iters / metrics["timed_gpu_time_ms"] / 1e9
    print(f"{args.warmup} + {args.iters} bf16 {n}³ matmuls: {metrics['gpu_time_ms']:.2f} ms all, "
          f"{metrics['timed_gpu_time_ms']:.2f} ms the {args.iters} ({tflops:.0f} TFLOP/s)")
    path = os.environ.get("AORTA_METRICS_PATH")
    if path:
        with open(path, "w") as out:
            json.dump(metrics, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
