"""A GPU step that one fp16 GEMM dominates, beside a small bf16 GEMM, elementwise kernels and an
optimizer step, for the kernel-level comparison on a GPU: ``GROW`` scales that GEMM's inner (K)
dimension (1.03: 3 % more K, so 3 % more work in the same tiles and waves) while the other
kernels stay. The GEMM is fp16 and the others bf16, so it runs a kernel of its own name.

It reports its step time on the GPU (``workload_step_time_ms``), which the kernel rows'
differences are set against: CUDA events around 40 steps after torchprof's window (its default
schedule records steps 2-4). A sleep kernel holds the GPU until the host has queued all 40 steps,
so the time is the GPU's alone: without it, launch gaps moved the step ±3 % across trials while
its GEMM moved ±0.1 %. ``workload_steps_queued_ahead`` says whether the lead was long enough.

    python -m aorta_core sweep=repeat trials=10 order=rounds collector=torchprof \
        '+env.GROW=1,1.03' output=runs/g -- python examples/reports/kernels/gemms.py
    aorta compare runs/g runs/g --pair 'env.GROW=1,collector=torchprof' \
        'env.GROW=1.03,collector=torchprof' --noise-floor runs/g
"""

import json
import os

import torch

PROFILED_STEPS = 8  # torchprof's default window (steps 2-4) and a margin after it
TIMED_STEPS = 40
LEAD_CYCLES = 200_000_000  # ~0.1 s of GPU clock: the host queues 40 steps in far less

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


for _ in range(PROFILED_STEPS):
    step()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda.synchronize()
torch.cuda._sleep(LEAD_CYCLES)
start.record()
for _ in range(TIMED_STEPS):
    step()
end.record()
queued_ahead = not start.query()  # the GPU was still asleep when the last step was queued
end.synchronize()
if "AORTA_METRICS_PATH" in os.environ:
    with open(os.environ["AORTA_METRICS_PATH"], "w") as out:
        json.dump({"step_time_ms": start.elapsed_time(end) / TIMED_STEPS,
                   "steps_queued_ahead": queued_ahead}, out)
