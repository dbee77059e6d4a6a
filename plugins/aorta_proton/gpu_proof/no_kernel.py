"""GPU proof payload: imports Triton and torch but launches no GPU kernel."""

import torch
import triton  # noqa: F401

print("no_kernel:", sum(torch.arange(10).tolist()))
