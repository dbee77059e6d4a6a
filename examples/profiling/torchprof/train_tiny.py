"""A tiny training loop that knows nothing about profiling (the payload of the example).

Runs on CPU, or on CUDA/ROCm; under ``torchrun`` it trains data-parallel (DDP, gloo on CPU,
NCCL/RCCL on GPUs) so that the trace holds communication. ``--device auto`` (the default) takes
the GPUs when every local rank can have one of its own (NCCL refuses two ranks on one GPU), else
the CPU; ``--device cpu`` or ``--device cuda`` says which.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn


def pick_device(requested: str, parser: argparse.ArgumentParser) -> torch.device:
    """GPU ``LOCAL_RANK`` when each local rank has a GPU of its own; the CPU otherwise."""
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "cuda" and gpus < ranks:
        parser.exit(2, f"train_tiny.py: --device cuda needs a GPU per local rank ({ranks}) and "
                       f"torch sees {gpus}; use --device cpu or fewer ranks\n")
    if requested == "cpu" or gpus < ranks:
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args()

    distributed = "RANK" in os.environ
    device = pick_device(args.device, parser)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
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
