"""A small, real PyTorch CPU training loop: aorta's ``workload=tiny`` (used by ``sweep=grid``).

Trains an MLP regressor on synthetic data and, when run under aorta, reports its loss and
throughput through ``AORTA_METRICS_PATH`` so that they land in the sweep's matrix. Run it with
``python -m aorta_core.workloads.tiny [--steps N] [--batch-size N] [--hidden N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from aorta_core.engine.records import write_json_atomic


def train(steps: int, batch_size: int, hidden: int, features: int, seed: int) -> dict[str, float]:
    """Train for ``steps`` steps on one CPU thread; the final loss and the step rate."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, 1),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    true_weights = torch.randn(features, 1)

    start = time.perf_counter()
    for _ in range(steps):
        x = torch.randn(batch_size, features)
        y = x @ true_weights + 0.1 * torch.randn(batch_size, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    elapsed = time.perf_counter() - start
    return {
        "loss_final": loss.item(),
        "step_time_ms": 1000 * elapsed / steps,
        "samples_per_s": steps * batch_size / elapsed,
    }


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m aorta_core.workloads.tiny",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_positive, default=30)
    parser.add_argument("--batch-size", type=_positive, default=32)
    parser.add_argument("--hidden", type=_positive, default=128)
    parser.add_argument("--features", type=_positive, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    metrics = train(args.steps, args.batch_size, args.hidden, args.features, args.seed)
    print(json.dumps(metrics))
    if path := os.environ.get("AORTA_METRICS_PATH"):
        write_json_atomic(Path(path), metrics)


if __name__ == "__main__":
    main()
