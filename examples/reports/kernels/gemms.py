"""A GPU step of three GEMMs and an elementwise kernel, one optimizer step each, for the
kernel-level comparison on a GPU: ``GROW`` scales the inner (K) dimension of one GEMM (1.03: 3 %
more K, so 3 % more work in the same tiles and waves) while the other kernels stay. That GEMM is
fp16 and the others bf16, so it runs a kernel of its own name. It reports its median step time
on the GPU (``workload_step_time_ms``, CUDA events), which the kernel rows' differences are set
against.

    python -m aorta_core sweep=repeat trials=10 order=rounds collector=torchprof \
        '+env.GROW=1,1.03' output=runs/g -- python examples/reports/kernels/gemms.py
    aorta compare runs/g runs/g --pair 'env.GROW=1,collector=torchprof' \
        'env.GROW=1.03,collector=torchprof'
"""

import json
import os
import statistics

import torch

torch.manual_seed(0)
device = "cuda"
k = round(8192 * float(os.environ.get("GROW", "1")) / 64) * 64  # whole 64-wide K slices
a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
b = torch.randn(4096, 8192, device=device, dtype=torch.bfloat16)
h = torch.randn(4096, k, device=device, dtype=torch.float16)
c = torch.randn(k, 4096, device=device, dtype=torch.float16)
weight = torch.nn.Parameter(torch.randn(2048, 2048, device=device, dtype=torch.bfloat16))
optimizer = torch.optim.SGD([weight], lr=1e-6)
steps_ms = []
for _ in range(12):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    optimizer.zero_grad()
    x = a @ b  # bf16, 4096 x 4096 x 8192
    y = h @ c  # the grown GEMM: fp16, 4096 x k x 4096
    z = torch.nn.functional.gelu(x[:, :2048] @ weight) + y[:, :2048].to(torch.bfloat16)
    z.float().sum().backward()
    optimizer.step()
    end.record()
    end.synchronize()
    steps_ms.append(start.elapsed_time(end))
# The step's GPU time, for what the kernel rows explain of it (the first step warms up).
if "AORTA_METRICS_PATH" in os.environ:
    with open(os.environ["AORTA_METRICS_PATH"], "w") as out:
        json.dump({"step_time_ms": statistics.median(steps_ms[1:])}, out)
