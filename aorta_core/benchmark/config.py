"""The benchmark's configuration: a structured-config schema composed with Hydra's compose API.

The schema is registered in Hydra's ConfigStore so that an unknown key or a wrong type fails at
compose time with the full key path, before any process group or model exists. ``hydra.main`` is
avoided on purpose: no chdir, no output folders, no logging takeover under ``torchrun``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

CONFIG_MODULE = "aorta_core.conf.benchmark"
SCHEMA_NAME = "benchmark_schema"


@dataclass
class ModelConfig:
    """Synthetic ranking transformer: sparse + dense features -> encoder -> per-position score."""

    vocab_size: int = 1000
    embedding_dim: int = 16
    num_dense_features: int = 2
    dense_dim: int = 8
    model_dim: int = 32
    num_heads: int = 2
    num_layers: int = 2
    mlp_hidden_dim: int = 64
    dropout: float = 0.0


@dataclass
class DataConfig:
    """Synthetic ranking data, generated on the training device from the seed and the step."""

    batch_size: int = 4
    sequence_length: int = 8
    sparse_features: int = 4
    #: Samples per epoch across all ranks; sets the number of steps per epoch.
    num_samples: int = 256


@dataclass
class ParallelConfig:
    """How the model is distributed: FSDP2 ``fully_shard`` per encoder layer, or DDP."""

    mode: str = "fsdp"
    #: FSDP2: free the unsharded parameters after forward (``reshard_after_forward``).
    reshard_after_forward: bool = True
    #: DDP bucket size.
    bucket_cap_mb: int = 25


@dataclass
class CompileConfig:
    enabled: bool = False
    backend: str = "inductor"
    mode: str | None = None
    fullgraph: bool = False


@dataclass
class TrainingConfig:
    #: ``none`` | ``bf16`` | ``fp16`` (fp16 uses a GradScaler).
    mixed_precision: str = "none"
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-8
    warmup_steps: int = 2
    #: Linear decay to zero ends here; 0 disables the schedule (constant lr).
    total_steps: int = 100
    grad_clip_norm: float = 1.0
    epochs: int = 1
    #: Stop after this many global steps (null: epochs x steps per epoch).
    max_steps: int | None = 10
    log_interval: int = 5


@dataclass
class TelemetryConfig:
    """Per-iteration stream timing, collective patching and the rank JSONL."""

    #: Off: no dedicated streams, no events, no patching; step time, loss and throughput remain.
    enabled: bool = True
    #: Sample clocks, power, temperature, memory and utilisation every ``gpu_diag_interval`` steps.
    gpu_diagnostics: bool = False
    gpu_diag_interval: int = 1
    #: Leading steps left out of the run summary (allocation, autotuning, compilation).
    summary_skip_steps: int = 1
    #: GPU runs: time a plain GEMM in the run's precision after training, so the summary has
    #: ``matmul_tflops`` and ``compute_fraction`` (compute-stream TFLOP/s over it).
    matmul_reference: bool = True


@dataclass
class ProfilingConfig:
    """The PyTorch profiler block; ``AORTA_TORCHPROF_DIR`` (torchprof env mode) overrides it."""

    enabled: bool = False
    wait: int = 1
    warmup: int = 1
    active: int = 2
    repeat: int = 1
    skip_first: int = 0
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    chrome_trace: bool = True
    gzip: bool = False
    tensorboard: bool = False
    key_averages: bool = False
    #: Trace export crashes Kineto on some ROCm builds; on ROCm it is off unless this is true.
    rocm_trace_export: bool = False
    #: Null: ``<output_dir>/torch_profiler``; one ``rank<R>/`` folder per rank below it.
    trace_dir: str | None = None


@dataclass
class BenchmarkConfig:
    #: Null: ``$AORTA_TRIAL_DIR/benchmark`` under a sweep, else ``./aorta_benchmark/<timestamp>``.
    output_dir: str | None = None
    seed: int = 1234
    #: ``auto`` (cuda when available) | ``cpu`` | ``cuda``.
    device: str = "auto"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    compile: CompileConfig = field(default_factory=CompileConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    profiling: ProfilingConfig = field(default_factory=ProfilingConfig)


CHOICES = {
    "device": ("auto", "cpu", "cuda"),
    "parallel.mode": ("fsdp", "ddp"),
    "training.mixed_precision": ("none", "bf16", "fp16"),
}


class ConfigError(ValueError):
    """A value the schema's types allow but the benchmark cannot use; names the key."""


def _register() -> None:
    ConfigStore.instance().store(name=SCHEMA_NAME, node=BenchmarkConfig)


def file_overrides(path: str) -> list[str]:
    """A YAML file of settings (``--config FILE``, as upstream's trainer takes it) as overrides.

    They go before the command line's, so a command-line override wins over the file.
    """
    import json

    def flatten(prefix: str, node) -> list[str]:
        if isinstance(node, dict):
            return [o for k, v in node.items() for o in flatten(f"{prefix}{k}.", v)]
        value = json.dumps(node) if isinstance(node, (str, list)) else (
            "null" if node is None else str(node).lower() if isinstance(node, bool) else str(node))
        return [f"{prefix[:-1]}={value}"]

    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of benchmark settings")
    return flatten("", data)


def compose_config(overrides: list[str]) -> DictConfig:
    """Compose ``config.yaml`` with ``overrides``; raise on unknown keys, types or choices."""
    _register()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    check_values(cfg)
    return cfg


def check_values(cfg: DictConfig) -> None:
    """Reject values outside the valid choices or ranges, naming the key."""
    for key, valid in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in valid:
            raise ConfigError(f"{key}={value!r} is not valid; use one of {', '.join(valid)}")
    positive = ("data.batch_size", "data.sequence_length", "data.sparse_features",
                "model.num_layers", "model.num_heads", "model.model_dim", "profiling.active",
                "telemetry.gpu_diag_interval")
    for key in positive:
        if OmegaConf.select(cfg, key) < 1:
            raise ConfigError(f"{key}={OmegaConf.select(cfg, key)} must be >= 1")
    if cfg.model.model_dim % cfg.model.num_heads:
        raise ConfigError(
            f"model.model_dim={cfg.model.model_dim} must be divisible by "
            f"model.num_heads={cfg.model.num_heads}"
        )


def resolve_output_dir(configured: str | None, stamp: str, env: Mapping[str, str]) -> Path:
    """The run folder: explicit > ``$AORTA_TRIAL_DIR/benchmark`` > ``./aorta_benchmark/<stamp>``.

    ``stamp`` comes from rank 0 (broadcast) so every rank lands in the same folder.
    """
    if configured:
        return Path(configured)
    if env.get("AORTA_TRIAL_DIR"):
        return Path(env["AORTA_TRIAL_DIR"]) / "benchmark"
    return Path("aorta_benchmark") / stamp


def default_stamp(seconds: float | None = None) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds))
