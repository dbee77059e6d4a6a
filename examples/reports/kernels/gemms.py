"""A GPU step of three GEMMs of different shapes and an elementwise kernel, one optimizer step
each, for the kernel-level comparison on a GPU: ``GROW`` scales the inner dimension of the
second GEMM's output (1.03: 3 % more columns, ~3 % more work) while the other kernels stay.

    python -m aorta_core sweep=repeat trials=10 collector=torchprof output=runs/g -- \
        python examples/reports/kernels/gemms.py
    python -m aorta_core sweep=repeat trials=10 collector=torchprof +env.GROW=1.03 \
        output=runs/g3 -- python examples/reports/kernels/gemms.py
    aorta compare runs/g runs/g3
"""

import os

import torch

torch.manual_seed(0)
device = "cuda"
grow = float(os.environ.get("GROW", "1"))
n = round(4096 * grow / 64) * 64  # a multiple of 64 keeps the same GEMM kernel
a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
b = torch.randn(4096, 8192, device=device, dtype=torch.bfloat16)
c = torch.randn(8192, n, device=device, dtype=torch.bfloat16)
weight = torch.nn.Parameter(torch.randn(2048, 2048, device=device, dtype=torch.bfloat16))
optimizer = torch.optim.SGD([weight], lr=1e-6)
for _ in range(12):
    optimizer.zero_grad()
    x = a @ b  # 4096 x 4096 x 8192
    y = x @ c  # the grown GEMM: 4096 x 8192 x n
    z = torch.nn.functional.gelu(y[:, :2048] @ weight)
    z.float().sum().backward()
    optimizer.step()
torch.cuda.synchronize()
