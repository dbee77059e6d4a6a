"""A tiny training loop that knows nothing about profiling (the payload of the example).

Runs on CPU, or on CUDA/ROCm when available; under ``torchrun`` it trains data-parallel (DDP,
gloo on CPU, NCCL/RCCL on GPUs) so that the trace holds communication.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args()

    distributed = "RANK" in os.environ
    cuda = torch.cuda.is_available()
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 10)
    ).to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(args.batch, args.width, device=device)
        y = torch.randint(0, 10, (args.batch,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if cuda:
        torch.cuda.synchronize()
    if distributed:
        dist.destroy_process_group()
    raise SystemExit(args.exit_code)


if __name__ == "__main__":
    main()
