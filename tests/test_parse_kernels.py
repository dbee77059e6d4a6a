"""``aorta parse OUTPUT --kernels`` through the real CLI, with a collector written as
docs/plugins.md says (``parse_metrics`` reads the artifact and keeps its rows in a module global,
``kernel_table`` returns them): the table is made again as a trial makes it, and a table that
cannot be made again (collector disabled, artifacts pruned, a hook that fails now) is kept as
recorded, with a line saying why, never deleted."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import PluginSite, run_aorta

GLOBAL_ROWS = '''
import dataclasses
import json
import os
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl
from aorta_core.api import KernelRow

_ROWS = []  # what parse_metrics read, for kernel_table (docs/plugins.md, kernel_table)

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="rows kept by its parse", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return dataclasses.replace(launch, argv=("sh", "-c", "echo '[[\\"sort\\", 3, 4.5], "
                                             "[\\"gemm\\", 1, 2.0]]' > k.json", "sh"),
                               cwd=artifact_dir)

@hookimpl
def parse_metrics(artifact_dir, options):
    _ROWS[:] = json.loads((artifact_dir / "k.json").read_text())
    return {"glob_kernels": len(_ROWS)}

@hookimpl
def kernel_table(artifact_dir, options):
    if os.environ.get("GLOB_TABLE_FAILS"):
        raise RuntimeError("the table's reader broke")
    return [KernelRow(name, calls, ms, "cpu_op") for name, calls, ms in _ROWS]
'''


@pytest.fixture
def swept(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    site = PluginSite(tmp_path / "site")
    site.add("glob", GLOBAL_ROWS)
    out = tmp_path / "run"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=glob", f"output={out}", "--",
                      "true"], tmp_path, site.env)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, site.env, next(out.glob("cells/*/trial_000"))


def _parse(out: Path, env: dict[str, str], extra: dict[str, str] | None = None):
    done = run_aorta(["parse", str(out), "--kernels"], out.parent, {**env, **(extra or {})})
    assert done.returncode == 0, done.stderr
    return done


def _rows(trial: Path) -> list[tuple]:
    return sorted(pl.read_parquet(trial / "kernels.parquet")
                  .select("name", "calls", "total_ms").rows())


def test_the_table_is_made_again_as_a_trial_makes_it(swept):
    out, env, trial = swept
    assert _rows(trial) == [("gemm", 1, 2.0), ("sort", 3, 4.5)]
    (trial / "kernels.parquet").unlink()
    done = _parse(out, env)
    assert f"{trial}: 2 kernel rows" in done.stdout
    assert _rows(trial) == [("gemm", 1, 2.0), ("sort", 3, 4.5)]
    assert json.loads((trial / "record.json").read_text())["kernels"] == {
        "file": "kernels.parquet", "rows": 2}
    assert not list(trial.glob(".kernels*"))


@pytest.mark.parametrize("why", ["disabled", "pruned", "fails"])
def test_a_table_that_cannot_be_made_again_is_kept(swept, why):
    out, env, trial = swept
    before = (trial / "kernels.parquet").read_bytes(), (trial / "record.json").read_bytes()
    extra = {"disabled": {"AORTA_DISABLE_PLUGINS": "glob"},
             "fails": {"GLOB_TABLE_FAILS": "1"}}.get(why, {})
    if why == "pruned":
        (trial / "glob" / "k.json").unlink()
    done = _parse(out, env, extra)
    reason = {"disabled": "glob is not loaded", "pruned": "glob gave no rows",
              "fails": "glob gave no rows"}[why]
    assert f"{trial}: kernel table kept as recorded ({reason})" in done.stdout
    assert ((trial / "kernels.parquet").read_bytes(), (trial / "record.json").read_bytes()) \
        == before
    if why == "fails":
        assert "kernel_table failed: RuntimeError: the table's reader broke" in done.stderr
    assert not list(trial.glob(".kernels*"))
