"""The synthetic ranking transformer and its counted FLOP model.

Layout follows upstream aorta's ranking model (embedding bag of sparse ids + projected dense
features -> TransformerEncoder -> LayerNorm -> MLP scorer -> one logit per position) so that
numbers stay comparable; the FLOP count is derived from the same shapes.
"""

from __future__ import annotations

import torch
from torch import nn

from aorta_core.benchmark.config import DataConfig, ModelConfig


class RankingTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.embedding_dim)
        self.sparse_proj = nn.Linear(cfg.embedding_dim, cfg.model_dim)
        self.dense_proj = nn.Linear(cfg.num_dense_features * cfg.dense_dim, cfg.model_dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model=cfg.model_dim,
                nhead=cfg.num_heads,
                dim_feedforward=cfg.mlp_hidden_dim,
                dropout=cfg.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(cfg.num_layers)
        )
        self.norm = nn.LayerNorm(cfg.model_dim)
        self.scorer = nn.Sequential(
            nn.Linear(cfg.model_dim, cfg.model_dim // 2),
            nn.GELU(),
            nn.Linear(cfg.model_dim // 2, 1),
        )

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """``dense`` [B, T, F, D], ``categorical`` [B, T, S] -> logits [B, T]."""
        sparse = self.sparse_proj(self.embedding(categorical).mean(dim=2))
        x = sparse + self.dense_proj(dense.flatten(2))
        for layer in self.layers:
            x = layer(x)
        return self.scorer(self.norm(x)).sum(dim=-1)  # [B, T, 1] -> [B, T], not a view


def weighted_bce(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Per-position BCE weighted by the sample's importance, averaged."""
    return nn.functional.binary_cross_entropy_with_logits(
        logits.float(), target, weight=weight, reduction="mean"
    )


def train_flops_per_step(model: ModelConfig, data: DataConfig) -> int:
    """FLOPs of one forward + backward on one rank's batch (backward counted as 2x forward).

    Counts matrix multiplies only (2 FLOPs per multiply-add): every Linear and the attention
    score/value products. Embedding gathers, norms and activations are left out, as is usual
    for a model-FLOP count, so the achieved TFLOP/s is a lower bound on the hardware's work.
    """
    tokens = data.batch_size * data.sequence_length
    d, h = model.model_dim, model.mlp_hidden_dim
    linear_macs = (
        model.embedding_dim * d
        + model.num_dense_features * model.dense_dim * d
        + model.num_layers * (4 * d * d + 2 * d * h)
        + d * (d // 2)
        + d // 2
    )
    attention_macs = model.num_layers * 2 * data.batch_size * data.sequence_length**2 * d
    forward = 2 * (tokens * linear_macs + attention_macs)
    return 3 * forward
