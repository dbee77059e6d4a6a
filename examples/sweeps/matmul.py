"""Time a square float32 matmul on the CPU (or the GPU when present) and report GFLOP/s.

Used by the example recipe sweep/matmul.yaml; reports through AORTA_METRICS_PATH.
"""

import argparse
import json
import os
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(args.size, args.size, device=device)
    b = torch.randn(args.size, args.size, device=device)
    a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.iters):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.iters
    metrics = {"matmul_ms": 1e3 * seconds, "gflops": 2 * args.size**3 / seconds / 1e9}
    print(json.dumps(metrics))
    if os.environ.get("AORTA_METRICS_PATH"):
        with open(os.environ["AORTA_METRICS_PATH"], "w", encoding="utf-8") as fh:
            json.dump(metrics, fh)


if __name__ == "__main__":
    main()
