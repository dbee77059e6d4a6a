"""A training-like loop of three CPU ops per step (matmul, sort, softmax), one optimizer step
each, for the kernel-level comparison: ``SORT_SCALE`` grows the sort's input (1.3: 30 % more
elements) while the other ops stay as they are. It reports its median step time
(``workload_step_time_ms``), which the kernel rows' differences are set against.

    python -m aorta_core sweep=repeat trials=8 order=rounds collector=torchprof \
        '+env.SORT_SCALE=1,1.3' output=runs/sort -- python examples/reports/kernels/ops.py
    aorta compare runs/sort runs/sort --pair 'env.SORT_SCALE=1,collector=torchprof' \
        'env.SORT_SCALE=1.3,collector=torchprof'
"""

import json
import os
import statistics
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)  # one thread: an op's time follows its work, not the scheduler
scale = float(os.environ.get("SORT_SCALE", "1"))
weight = torch.nn.Parameter(torch.randn(384, 384))
optimizer = torch.optim.SGD([weight], lr=1e-6)
x = torch.randn(384, 384)
keys = torch.randn(int(400_000 * scale))
steps_ms = []
for _ in range(12):
    start = time.perf_counter()
    optimizer.zero_grad()
    y = (x @ weight).softmax(dim=-1)
    torch.sort(keys)
    y.sum().backward()
    optimizer.step()
    steps_ms.append((time.perf_counter() - start) * 1e3)
# The step time, for what the kernel rows explain of it (the first step warms up).
if "AORTA_METRICS_PATH" in os.environ:
    with open(os.environ["AORTA_METRICS_PATH"], "w") as out:
        json.dump({"step_time_ms": statistics.median(steps_ms[1:])}, out)
