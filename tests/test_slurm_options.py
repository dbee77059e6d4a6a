"""``--slurm`` of ``aorta parse``, ``diagnose`` and ``timeline`` refused in one line before any
work: a setting that is no setting, no Slurm to submit to. Any machine (no cluster needed)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_aorta

from aorta_core.api.slurm_map import SlurmSettings, parse_settings


@pytest.mark.parametrize(("spec", "said"), [
    ("part=gpu", "--slurm 'part=gpu': give key=value pairs separated by commas, the keys among "
                 "partition, time, account, qos, constraint, cpus, mem_factor, mem_gb, parallel, "
                 "folder"),
    ("time=soon", "--slurm 'time=soon': time takes a number"),
    ("cpus=0", "--slurm 'cpus=0': cpus must be above 0"),
])
@pytest.mark.parametrize("tool", ["parse", "diagnose", "timeline"])
def test_a_setting_that_is_none_is_named_with_the_keys(tmp_path: Path, tool, spec, said):
    argv = {"parse": ["parse", "torchprof", str(tmp_path)]}.get(tool, [tool, str(tmp_path)])
    done = run_aorta([*argv, "--slurm", spec], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"aorta: error: {said}"]


def test_without_sbatch_it_says_where_to_run_it(tmp_path: Path):
    python = Path(shutil.which("python3") or "/usr/bin/python3").parent
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("python3", "python"):  # an interpreter on PATH, no Slurm
        if (python / tool).exists():
            (bare / tool).symlink_to(python / tool)
    done = run_aorta(["diagnose", str(tmp_path), "--slurm", "defaults"], cwd=tmp_path,
                     env={**os.environ, "PATH": str(bare)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "aorta: error: --slurm: no sbatch on PATH; run it where Slurm jobs are submitted (a "
        "login node), or leave --slurm out to read the traces here"]


def test_each_task_asks_for_what_its_largest_item_needs():
    settings = parse_settings("partition=big, time=30,mem_factor=2")
    assert (settings.partition, settings.time) == ("big", 30)
    assert settings.memory_gb(3 << 30) == 6.0 and settings.memory_gb(1) == 1.0  # 1 GB at least
    assert parse_settings("mem_gb=none").memory_gb(1 << 40) is None
    assert parse_settings("mem_gb=12").memory_gb(1 << 40) == 12.0
    assert parse_settings("") == SlurmSettings()
