"""Your own training loop, measured from inside by whatever collectors the sweep selected.

The two lines that matter are marked; outside an aorta trial they do nothing. Runs on CPU, or on
CUDA/ROCm when available. Under ``torchrun`` every rank trains on its own (the session reads the
rank from ``$RANK``); a real job would add its process group and DDP/FSDP as usual.
"""

import argparse
import os

import torch
from torch import nn

from aorta_core import payload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if cuda else "cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with payload.session() as session:  # 1: start the selected collectors
        for _ in range(args.steps):
            x = torch.randn(32, args.width, device=device)
            y = torch.randint(0, 10, (32,), device=device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            session.step()  # 2: one iteration ended
        print(f"collectors inside: {list(session.names)}; final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
