"""A payload that starts Proton itself (``collector.proton.mode: env``) around its GPU work.

Outside an aorta trial ``payload.start()`` returns False and the script runs unprofiled.
"""

import torch
from aorta_proton import payload


def main() -> None:
    started = payload.start()
    print("proton started:", started)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device="cuda")
    for _ in range(10):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    assert torch.isfinite(loss).item()
    payload.finalize()
    print("train_step: PASS")


if __name__ == "__main__":
    main()
