"""The benchmark's configuration: a structured-config schema composed with Hydra's compose API.

The schema is registered in Hydra's ConfigStore so that an unknown key or a wrong type fails at
compose time with the full key path, before any process group or model exists. ``hydra.main`` is
avoided on purpose: no chdir, no output folders, no logging takeover under ``torchrun``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from aorta_core.engine.argv import escape_for_omegaconf

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
class InjectConfig:
    """Fault injection on one rank, per training step (docs/benchmark.md "Fault injection"): the
    ground truth ``aorta diagnose`` is checked against. All zero: nothing is injected."""

    #: The rank that is slowed (every other rank runs as usual).
    rank: int = 0
    #: Host time outside any op at the start of each step: ``host_mode`` sleep or burn (a busy
    #: Python loop on the CPU).
    host_ms: float = 0.0
    host_mode: str = "sleep"
    #: Extra time inside the data step (a sleep in the data loading span).
    data_ms: float = 0.0
    #: Extra compute after the forward: matmuls for this long (CPU: until the time is spent;
    #: GPU: as many as took this long when calibrated at the start).
    compute_ms: float = 0.0
    #: A sleep before the step's first all_reduce or reduce_scatter (a late arrival).
    collective_ms: float = 0.0

    def active(self) -> bool:
        return any(v > 0 for v in (self.host_ms, self.data_ms, self.compute_ms,
                                   self.collective_ms))


#: The collector whose public options type gives the ``profiling`` block its profiler keys:
#: upstream aorta's block configures the PyTorch profiler, which that collector runs.
PROFILER_COLLECTOR = "torchprof"
#: Its options the benchmark decides itself: no argv to wrap, the schedule follows the
#: benchmark's iterations, the activities its device.
DECIDED_BY_BENCHMARK = ("mode", "activities", "step_on")
#: Upstream aorta's defaults, where they differ from the collector's.
UPSTREAM_DEFAULTS = {"active": 2, "record_shapes": True}


@dataclass
class ProfilingBlock:
    """The ``profiling`` block's own keys (upstream aorta's), beside the profiler's options."""

    enabled: bool = False
    #: Trace export crashes Kineto on some ROCm builds; on ROCm it is off unless this is true.
    rocm_trace_export: bool = False
    #: Null: ``<output_dir>/torch_profiler``; one ``rank<R>/`` folder per rank below it.
    trace_dir: str | None = None


def profiling_schema(options: type | None) -> DictConfig:
    """The ``profiling`` block: its own keys plus every field of ``options`` (the profiler
    collector's options dataclass) that the benchmark does not decide, at upstream's defaults.
    With no such collector installed (``None``) the block takes its own keys and any other, so
    that a config written for it still composes; enabling it then warns that nothing runs it."""
    if options is None:
        block = OmegaConf.structured(ProfilingBlock)
        OmegaConf.set_struct(block, False)
        return block
    hints = typing.get_type_hints(options)
    taken = [(f.name, hints[f.name], field(default_factory=functools.partial(
                 copy.deepcopy, UPSTREAM_DEFAULTS.get(f.name, _default(f)))))
             for f in dataclasses.fields(options) if f.name not in DECIDED_BY_BENCHMARK]
    own = [(f.name, f.type, field(default=f.default)) for f in dataclasses.fields(ProfilingBlock)]
    return OmegaConf.structured(dataclasses.make_dataclass("ProfilingConfig", own + taken))


def _default(option: dataclasses.Field) -> Any:
    if option.default is not dataclasses.MISSING:
        return option.default
    return option.default_factory()  # type: ignore[misc]


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
    inject: InjectConfig = field(default_factory=InjectConfig)
    #: Filled in at registration: :func:`profiling_schema` of the installed profiler.
    profiling: Any = field(default_factory=dict)


CHOICES = {
    "device": ("auto", "cpu", "cuda"),
    "parallel.mode": ("fsdp", "ddp"),
    "training.mixed_precision": ("none", "bf16", "fp16"),
    "inject.host_mode": ("sleep", "burn"),
}
#: Injected times: ms per step, >= 0.
INJECT_MS = ("host_ms", "data_ms", "compute_ms", "collective_ms")


#: Upstream aorta's trainer keys (``--override``) that are one of ours under another name. Its
#: other keys with a counterpart here have the same name (``training.max_steps``, ``model.*``).
UPSTREAM_KEYS = {
    "training.output_dir": "output_dir",
    "training.batch_size": "data.batch_size",
    "optimizer.lr": "training.lr",
    "optimizer.weight_decay": "training.weight_decay",
    "optimizer.betas": "training.betas",
    "optimizer.eps": "training.eps",
    "scheduler.warmup_steps": "training.warmup_steps",
    "scheduler.total_steps": "training.total_steps",
    "dataset.num_samples": "data.num_samples",
    "dataset.sequence_length": "data.sequence_length",
    "dataset.sparse_features": "data.sparse_features",
    "distributed.mode": "parallel.mode",
    "distributed.bucket_cap_mb": "parallel.bucket_cap_mb",
}
_ABSENT = object()


class ConfigError(ValueError):
    """A value the schema's types allow but the benchmark cannot use; names the key."""


def _register() -> None:
    schema = OmegaConf.structured(BenchmarkConfig)
    schema.profiling = profiling_schema(_profiler_options())
    ConfigStore.instance().store(name=SCHEMA_NAME, node=schema)


def _profiler_options() -> type | None:
    """The profiler collector's options type, through the plugin registry (no import of it)."""
    from aorta_core.engine.plugins import load_registry

    collector = load_registry().collectors.get(PROFILER_COLLECTOR)
    return collector.info.options if collector is not None else None


def load_settings(path: str) -> DictConfig:
    """``--config FILE``: a YAML (or JSON) mapping of settings, read by OmegaConf as written."""
    try:
        data = OmegaConf.load(path)
    except (OSError, yaml.YAMLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else " ".join(str(exc).split())
        raise ConfigError(f"--config {path}: {reason}; give a YAML file of benchmark settings, "
                          "e.g. config/default.yaml") from None
    if not isinstance(data, DictConfig):
        raise ConfigError(f"--config {path} holds no mapping of settings; give nested YAML such "
                          "as config/default.yaml")
    return data


def upstream_value(text: str) -> Any:
    """An ``--override`` value read as upstream's trainer reads it: true/false (any case), int,
    float, ``[a, b]`` (a list of strings, converted by the schema), else the text as written
    (``${`` kept literal); ``null`` is None here, for the optional settings."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text == "null":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [part.strip() for part in inner.split(",")] if inner else []
    return escape_for_omegaconf(text)


def _groups() -> set[str]:
    """The config groups (``model``, ``parallel``): folders of the conf package."""
    root = resources.files(CONFIG_MODULE)
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")}


def _drop(settings: DictConfig, keys: list[str]) -> DictConfig:
    """``settings`` without ``keys`` (dotted), so that the command line's values win."""
    for key in keys:
        parent_key, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(settings, parent_key) if parent_key else settings
        if isinstance(parent, DictConfig) and leaf in parent:
            del parent[leaf]
    return settings


def compose_config(overrides: list[str], config_file: str | None = None,
                   pairs: Sequence[tuple[str, str]] = ()) -> DictConfig:
    """Compose ``config.yaml`` and the Hydra ``overrides``, merge ``config_file`` under them, then
    apply the ``--override`` ``pairs`` in order; raise on unknown keys, types or choices.

    The file is merged by OmegaConf (its text is kept as written) without the keys the overrides
    set, so the command line wins over the file; a group picked there (``model=tiny``) drops the
    file's section of it. A pair's key may be upstream aorta's name (``UPSTREAM_KEYS``); a pair
    naming a group picks it.
    """
    _register()
    groups = _groups()
    pairs = [(key, UPSTREAM_KEYS.get(key, key), value) for key, value in pairs]
    picks = [f"{ours}={value}" for _, ours, value in pairs if ours in groups]
    overrides = [*overrides, *picks]
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    if config_file is not None:
        keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(overrides)]
        cfg = OmegaConf.merge(cfg, _drop(load_settings(config_file), keys))
    for given, ours, value in pairs:
        if ours in groups:
            continue
        if OmegaConf.select(cfg, ours, default=_ABSENT) is _ABSENT:
            raise ConfigError(f"--override {given}: no such benchmark setting; use a key from "
                              "docs/benchmark.md (upstream aorta's names are mapped where they "
                              "mean the same)")
        OmegaConf.update(cfg, ours, upstream_value(value), merge=True)
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
        if OmegaConf.select(cfg, key, default=1) < 1:
            raise ConfigError(f"{key}={OmegaConf.select(cfg, key)} must be >= 1")
    for key in INJECT_MS:
        value = cfg.inject[key]
        if not value >= 0:  # NaN too
            raise ConfigError(f"inject.{key}={value} must be >= 0 (ms per step; 0: none)")
    if cfg.inject.rank < 0:
        raise ConfigError(f"inject.rank={cfg.inject.rank} must be >= 0 (the rank to slow)")
    if cfg.model.model_dim % cfg.model.num_heads:
        raise ConfigError(
            f"model.model_dim={cfg.model.model_dim} must be divisible by "
            f"model.num_heads={cfg.model.num_heads}"
        )


def check_inject(cfg: DictConfig, world_size: int) -> None:
    """An injection must name a rank of the job."""
    inject = cfg.inject
    if any(inject[k] > 0 for k in INJECT_MS) and inject.rank >= world_size:
        raise ConfigError(f"inject.rank={inject.rank} but the job has {world_size} rank(s) "
                          f"(0-{world_size - 1}); pick one of them")


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
