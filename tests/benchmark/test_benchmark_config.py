"""Composition of the benchmark config: groups, typed schema, value checks, output folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from aorta_core.benchmark.config import ConfigError, compose_config, resolve_output_dir


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
