"""The payload of this evidence (run as /tmp/p.py; imports split and the file opened in a `with`
for ruff, the statements otherwise as run): CUDA events around 20 bf16 4096² products with a
5 ms host sleep after each, so that the GPU idles most of the span."""
import json
import os
import time

import torch

a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
(a @ b).sum().item()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(20):
    c = a @ b
    time.sleep(0.005)
end.record()
torch.cuda.synchronize()
with open(os.environ["AORTA_METRICS_PATH"], "w") as f:
    json.dump({"gpu_time_ms": start.elapsed_time(end)}, f)
