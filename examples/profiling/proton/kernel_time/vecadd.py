"""A Triton vector add launched 20 times plus one cuBLAS matmul; checks its own result."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def main() -> None:
    n = 1 << 22
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    for _ in range(20):
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    a = torch.randn(1024, 1024, device="cuda")
    (a @ a).sum().item()
    torch.cuda.synchronize()
    assert torch.allclose(out, x + y)
    print("vecadd: PASS")


if __name__ == "__main__":
    main()
