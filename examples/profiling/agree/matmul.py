"""The payload of the agreement sweep: 3 warm-up + 50 bf16 8192³ matmuls that time themselves.

CUDA events around all 53 products and around the 50 after the warm-up; both go to
``$AORTA_METRICS_PATH`` (when aorta runs it), so that ``sweep=agree`` has the payload's own clock
as its reference column:

- ``gpu_time_ms``: all 53 (``workload_gpu_time_ms``, the default ``agree.reference``): the same
  span of work as a profiler's whole-run kernel total, which also counts the warm-up;
- ``timed_gpu_time_ms``: the 50 alone (``agree.reference=workload_timed_gpu_time_ms``).

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
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU (torch sees none)")
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    first, warm, last = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    first.record()
    for _ in range(args.warmup):
        a @ b
    warm.record()
    for _ in range(args.iters):
        a @ b
    last.record()
    last.synchronize()
    metrics = {"gpu_time_ms": first.elapsed_time(last),
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
