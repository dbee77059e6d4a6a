"""A small, real PyTorch CPU training loop: the `workload=tiny` of aorta (used by `sweep=grid`).

Trains an MLP regressor on synthetic data and, when run under aorta, reports its loss and
throughput through ``AORTA_METRICS_PATH`` so that they land in the sweep's matrix.
"""

import argparse
import json
import os
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.features, args.hidden),
        torch.nn.GELU(),
        torch.nn.Linear(args.hidden, args.hidden),
        torch.nn.GELU(),
        torch.nn.Linear(args.hidden, 1),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    true_weights = torch.randn(args.features, 1)

    start = time.perf_counter()
    for _ in range(args.steps):
        x = torch.randn(args.batch_size, args.features)
        y = x @ true_weights + 0.1 * torch.randn(args.batch_size, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    elapsed = time.perf_counter() - start

    metrics = {
        "loss_final": loss.item(),
        "step_time_ms": 1000 * elapsed / args.steps,
        "samples_per_s": args.steps * args.batch_size / elapsed,
    }
    print(json.dumps(metrics))
    path = os.environ.get("AORTA_METRICS_PATH")
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(metrics, fh)
        os.replace(tmp, path)


if __name__ == "__main__":
    main()
