"""Synthetic ranking batches, generated on the training device.

A batch is a pure function of (seed, rank, global step): runs are reproducible and every rank
sees different samples, without a dataset in memory or a host-to-device copy per step (which
would make the data path, not the model, the bottleneck on a fast GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aorta_core.benchmark.config import DataConfig, ModelConfig


@dataclass(frozen=True)
class Batch:
    dense: torch.Tensor  # [B, T, F, D] float
    categorical: torch.Tensor  # [B, T, S] int64 in [0, vocab)
    target: torch.Tensor  # [B, T] float in [0, 1)
    importance: torch.Tensor  # [B, T] float in [0, 1)


def batch_seed(seed: int, rank: int, global_step: int) -> int:
    """Distinct, stable seed per (rank, step); fits a 63-bit generator seed."""
    return (seed * 1_000_003 + rank * 7_919 + global_step) % (2**63 - 1)


def make_batch(
    data: DataConfig, model: ModelConfig, seed: int, rank: int, global_step: int,
    device: torch.device,
) -> Batch:
    gen = torch.Generator(device=device)
    gen.manual_seed(batch_seed(seed, rank, global_step))
    b, t = data.batch_size, data.sequence_length
    dense = torch.randn(
        (b, t, model.num_dense_features, model.dense_dim), generator=gen, device=device
    )
    categorical = torch.randint(
        0, model.vocab_size, (b, t, data.sparse_features), generator=gen, device=device
    )
    target = torch.rand((b, t), generator=gen, device=device)
    importance = torch.rand((b, t), generator=gen, device=device)
    return Batch(dense, categorical, target, importance)


def steps_per_epoch(data: DataConfig, world_size: int) -> int:
    """Steps per epoch as a drop-last distributed sampler would give (at least one)."""
    return max(1, data.num_samples // (data.batch_size * world_size))
