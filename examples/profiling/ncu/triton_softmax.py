"""A Triton payload for Nsight Compute: a fused row softmax, checked against torch.softmax.

    python examples/profiling/ncu/triton_softmax.py --rows 4096 --cols 2048 --iters 3
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                            BLOCK=triton.next_power_of_2(cols))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=2048)
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU (torch sees none)")
    x = torch.randn(args.rows, args.cols, device="cuda")
    for _ in range(args.iters):
        y = softmax(x)
    torch.cuda.synchronize()
    err = (y - torch.softmax(x, dim=1)).abs().max().item()
    print(f"triton softmax {args.rows}x{args.cols} x{args.iters}: max abs error {err:.2e}")
    return 0 if err < 1e-5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
