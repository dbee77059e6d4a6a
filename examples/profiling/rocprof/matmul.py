"""A small GPU workload for the rocprof example: a few matmuls and an add on the first GPU.

Runs on CPU when no GPU is visible (rocprofv3 then records no kernel and writes nothing).
"""

import torch


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(2048, 2048, device=device)
    b = torch.randn(2048, 2048, device=device)
    for _ in range(10):
        a = (a @ b).tanh_() + 1.0
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"device={device} checksum={float(a.sum()):.3f}")


if __name__ == "__main__":
    main()
