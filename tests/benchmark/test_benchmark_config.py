"""Composition of the benchmark config: groups, typed schema, value checks, output folder, and
upstream's trainer flags ``--config FILE`` and ``--override key=value``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ValidationError

from aorta_core.benchmark.__main__ import split_argv
from aorta_core.benchmark.config import (
    ConfigError,
    compose_config,
    profiling_schema,
    resolve_output_dir,
)

REPO = Path(__file__).resolve().parents[2]
#: The path of the reported bug (issue 14): non-ASCII and a backslash, kept as written.
ODD_DIR = "café/x\\y"


def test_defaults_compose_tiny_fsdp():
    cfg = compose_config([])
    assert cfg.parallel.mode == "fsdp"
    assert cfg.model.model_dim == 32
    assert cfg.profiling.enabled is False
    assert cfg.output_dir is None


def test_groups_and_overrides_apply():
    cfg = compose_config(["model=small", "parallel=ddp", "profiling.enabled=true",
                          "profiling.active=3"])
    assert (cfg.model.model_dim, cfg.model.num_layers) == (768, 8)
    assert cfg.parallel.mode == "ddp"
    assert (cfg.profiling.enabled, cfg.profiling.active) == (True, 3)


def test_unknown_key_fails_at_compose_naming_the_path():
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(["model.num_layerz=3"])
    assert "model.num_layerz" in str(info.value.__cause__)


def test_wrong_type_fails_naming_the_path():
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(["training.lr=fast"])
    assert "training.lr" in str(info.value.__cause__)


@pytest.mark.parametrize(("override", "key"), [
    ("parallel.mode=zero3", "parallel.mode"),
    ("training.mixed_precision=fp8", "training.mixed_precision"),
    ("model.num_heads=5", "model.model_dim"),
    ("data.batch_size=0", "data.batch_size"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        compose_config([override])


def test_cli_bad_override_exits_2_with_one_line(benchmark_runner):
    proc = benchmark_runner(["model.num_layerz=3"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "full_key: model.num_layerz" in lines[0]


def test_output_dir_precedence():
    env = {"AORTA_TRIAL_DIR": "/trial"}
    assert resolve_output_dir("/explicit", "s", env) == Path("/explicit")
    assert resolve_output_dir(None, "s", env) == Path("/trial/benchmark")
    assert resolve_output_dir(None, "20260101-000000", {}) == Path(
        "aorta_benchmark/20260101-000000")


def cli(*argv: str):
    return compose_config(*split_argv(list(argv)))


def test_shipped_default_yaml_is_upstreams_size():
    cfg = cli("--config", str(REPO / "config/default.yaml"))
    small = compose_config(["model=small"])
    assert cfg.model == small.model  # upstream's default model
    assert (cfg.data.batch_size, cfg.data.sequence_length, cfg.data.sparse_features) == (8, 64, 32)
    assert (cfg.training.max_steps, cfg.training.warmup_steps, cfg.training.mixed_precision) == (
        200, 100, "bf16")


def test_command_line_wins_over_the_file_and_a_picked_group_drops_its_section(tmp_path):
    settings = tmp_path / "s.yaml"
    settings.write_text("model:\n  num_layers: 3\ntraining:\n  max_steps: 7\n  lr: 0.5\n")
    cfg = cli("--config", str(settings), "training.max_steps=2")
    assert (cfg.model.num_layers, cfg.training.max_steps, cfg.training.lr) == (3, 2, 0.5)
    assert cli("--config", str(settings), "model=small").model.num_layers == 8


def test_override_groups_all_count_and_upstream_names_map(tmp_path):
    cfg = cli("--config", str(REPO / "config/default.yaml"),
              "--override", "training.max_steps=50", "model=tiny", "optimizer.lr=0.001",
              "--override", "training.batch_size=3", "distributed.mode=ddp",
              "--override", "optimizer.betas=[0.8, 0.95]", f"training.output_dir={tmp_path}/a b")
    assert (cfg.training.max_steps, cfg.model.model_dim, cfg.training.lr) == (50, 32, 0.001)
    assert (cfg.data.batch_size, cfg.parallel.mode) == (3, "ddp")
    assert list(cfg.training.betas) == [0.8, 0.95] and cfg.output_dir == f"{tmp_path}/a b"
    assert cli("--override", "training.max_steps=3", "training.max_steps=null").training.max_steps \
        is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--override", "fsdp.sharding_strategy=full_shard"],
     "--override fsdp.sharding_strategy: no such benchmark setting; use a key from docs/benchmark"),
    (["--override", "training.max_steps"], "--override training.max_steps: expected key=value"),
    (["--config"], "--config needs a file, e.g. --config config/default.yaml"),
    (["--enable-rocm-metrics"], "unknown option --enable-rocm-metrics; the benchmark takes"),
    (["--config", "/nonexistent.yaml"], "--config /nonexistent.yaml: No such file or directory"),
])
def test_bad_flags_are_one_line_naming_the_fix(argv, message):
    with pytest.raises(ConfigError, match="^" + message.replace(".", r"\.")):
        cli(*argv)


def test_config_file_text_is_kept_as_written(tmp_path, benchmark_runner, tiny):
    """Issue 14: the file used to be flattened through json.dumps (``caf\\u00e9/x\\\\y``)."""
    settings = tmp_path / "s.yaml"
    settings.write_text(f"output_dir: {tmp_path}/{ODD_DIR}\ntraining:\n  max_steps: 1\n",
                        encoding="utf-8")
    proc = benchmark_runner(["--config", str(settings), *tiny, "training.max_steps=1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = (tmp_path / ODD_DIR / "config.yaml").read_text(encoding="utf-8")
    assert f"output_dir: {tmp_path}/{ODD_DIR}\n" in saved
    out = tmp_path / "over"
    proc = benchmark_runner([*tiny, "training.max_steps=1", "--override",
                             f"training.output_dir={out}/{ODD_DIR}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / ODD_DIR / "rank_00_metrics.jsonl").is_file()


def test_cli_bad_flag_exits_2_with_one_line(benchmark_runner):
    proc = benchmark_runner(["--override", "dataloader.num_workers=4"])
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "aorta benchmark: bad config: --override dataloader.num_workers: no such benchmark "
        "setting; use a key from docs/benchmark.md (upstream aorta's names are mapped where "
        "they mean the same)"]


@dataclass
class _ProfilerOptions:
    """An options type as a profiler collector declares it (strings as annotations, a list)."""

    mode: str = "wrap"
    activities: list[str] = field(default_factory=list)
    step_on: str = "optimizer"
    active: int = 3
    record_shapes: bool = False
    with_modules: bool = False
    rows: list[int] = field(default_factory=lambda: [1, 2])


def test_the_profiling_block_takes_the_profiler_s_options_type():
    """Every option the benchmark does not decide, typed, at upstream's defaults where it has
    one: a field the collector adds reaches the block without a copy here."""
    block = profiling_schema(_ProfilerOptions)
    assert set(block) == {"enabled", "rocm_trace_export", "trace_dir", "active",
                          "record_shapes", "with_modules", "rows"}
    assert (block.active, block.record_shapes, block.with_modules, list(block.rows)) == (
        2, True, False, [1, 2])
    with pytest.raises(ValidationError, match="active"):
        block.active = "many"
    with pytest.raises(ConfigAttributeError, match="with_modlues"):
        block.with_modlues = True


def test_without_the_profiler_collector_the_block_takes_any_key():
    """A config written for the block still composes where the collector is not installed; the
    benchmark then warns that nothing runs the block (test_benchmark_run)."""
    block = profiling_schema(None)
    block.active = 2
    assert OmegaConf.to_container(block) == {"enabled": False, "rocm_trace_export": False,
                                             "trace_dir": None, "active": 2}
