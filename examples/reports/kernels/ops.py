"""A training-like loop of three CPU ops per step (matmul, sort, softmax), one optimizer step
each, for the kernel-level comparison: ``SORT_SCALE`` grows the sort's input (1.3: 30 % more
elements) while the other ops stay as they are.

    python -m aorta_core sweep=repeat trials=8 collector=torchprof output=runs/base -- \
        python examples/reports/kernels/ops.py
    python -m aorta_core sweep=repeat trials=8 collector=torchprof +env.SORT_SCALE=1.3 \
        output=runs/sort30 -- python examples/reports/kernels/ops.py
    aorta compare runs/base runs/sort30
"""

import os

import torch

torch.manual_seed(0)
torch.set_num_threads(1)  # one thread: an op's time follows its work, not the scheduler
scale = float(os.environ.get("SORT_SCALE", "1"))
weight = torch.nn.Parameter(torch.randn(384, 384))
optimizer = torch.optim.SGD([weight], lr=1e-6)
x = torch.randn(384, 384)
keys = torch.randn(int(400_000 * scale))
for _ in range(12):
    optimizer.zero_grad()
    y = (x @ weight).softmax(dim=-1)
    torch.sort(keys)
    y.sum().backward()
    optimizer.step()
