"""The device's dense matmul rate, measured in the run, so that the compute stream's TFLOP/s can
be read as a fraction of what this GPU does on a plain GEMM (``compute_fraction``)."""

from __future__ import annotations

from typing import Any

import torch


def matmul_rate_tflops(device: torch.device, dtype: torch.dtype, sizes: tuple[int, ...] = (8192,),
                       iters: int = 20) -> dict[str, Any]:
    """Best rate over square ``n``-GEMMs of ``dtype``, timed with CUDA events after a warm-up."""
    best: dict[str, Any] = {}
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            a @ b
        end.record()
        end.synchronize()
        rate = 2 * n**3 * iters / (start.elapsed_time(end) / 1e3) / 1e12
        if rate > best.get("tflops", 0.0):
            best = {"tflops": rate, "n": n}
        del a, b
    torch.cuda.empty_cache()
    return best


def reference_metrics(device: torch.device, dtype: torch.dtype | None,
                      metrics: dict[str, Any]) -> dict[str, float]:
    """``matmul_tflops`` in the run's precision and ``compute_fraction`` of it (GPU runs only)."""
    if device.type != "cuda":
        return {}
    rate = matmul_rate_tflops(device, dtype or torch.float32)["tflops"]
    out = {"matmul_tflops": rate}
    if isinstance(metrics.get("compute_tflops"), float) and rate > 0:
        out["compute_fraction"] = metrics["compute_tflops"] / rate
    return out
