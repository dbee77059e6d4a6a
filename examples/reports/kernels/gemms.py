"""A GPU step that one fp16 GEMM dominates, beside a small bf16 GEMM, elementwise kernels and an
optimizer step, for the kernel-level comparison on a GPU: ``GROW`` scales that GEMM's inner (K)
dimension (1.03: 3 % more K, so 3 % more work in the same tiles and waves) while the other
kernels stay. The GEMM is fp16 and the others bf16, so it runs a kernel of its own name.

The step difference the kernel rows are set against is torchprof's own
(``torchprof_step_time_ms``: the GPU's time per profiled step, in the window the rows come from).
The payload's timing of later steps would not do: on an H100 it moved ±3 % across trials while
this GEMM moved ±0.1 %, with the host far ahead of the GPU; the GPU's clocks differ from one
stretch of a run to the next.

    python -m aorta_core sweep=repeat trials=10 order=rounds collector=torchprof \
        '+env.GROW=1,1.03' output=runs/g -- python examples/reports/kernels/gemms.py
    aorta compare runs/g runs/g --pair 'env.GROW=1,collector=torchprof' \
        'env.GROW=1.03,collector=torchprof' --noise-floor runs/g
"""

import os

import torch

STEPS = 8  # torchprof's default window (steps 2-4) and a margin after it

torch.manual_seed(0)
device = "cuda"
k = round(8192 * float(os.environ.get("GROW", "1")) / 64) * 64  # whole 64-wide K slices
a = torch.randn(2048, 2048, device=device, dtype=torch.bfloat16)
b = torch.randn(2048, 2048, device=device, dtype=torch.bfloat16)
h = torch.randn(8192, k, device=device, dtype=torch.float16)
c = torch.randn(k, 8192, device=device, dtype=torch.float16)
weight = torch.nn.Parameter(torch.randn(2048, 2048, device=device, dtype=torch.bfloat16))
optimizer = torch.optim.SGD([weight], lr=1e-6)


def step() -> None:
    optimizer.zero_grad()
    x = a @ b  # bf16, 2048 x 2048 x 2048
    y = h @ c  # the grown GEMM: fp16, 8192 x k x 8192
    z = torch.nn.functional.gelu(x @ weight) + y[:2048, :2048].to(torch.bfloat16)
    z.float().sum().backward()
    optimizer.step()


for _ in range(STEPS):
    step()
torch.cuda.synchronize()
