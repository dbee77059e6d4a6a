"""A bf16 matmul payload for Nsight Compute: a few GEMMs whose result is checked.

    python examples/profiling/ncu/matmul.py --size 4096 --iters 3
"""

from __future__ import annotations

import argparse

import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU (torch sees none)")
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.iters):
        c = a @ b
    torch.cuda.synchronize()
    # Check one row against fp32 so a silent wrong result fails the trial.
    ref = a[:1].float() @ b.float()
    err = (c[:1].float() - ref).abs().max().item() / ref.abs().max().item()
    print(f"matmul {n}x{n} bf16 x{args.iters}: max relative error {err:.2e}")
    return 0 if err < 2e-2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
