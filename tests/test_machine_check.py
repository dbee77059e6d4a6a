"""A collector that cannot measure on this machine says so before the run (``check_machine``),
and one whose profiler could not start inside the workload is that trial's error
(``collect_artifacts`` raising ``SetupError``): a test collector through the real CLI."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
from cli_helpers import good_collector, records, run_aorta
from needs import needs

#: Only the test collector: the installed ones stay out of the way.
ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": ",".join(
    sorted({ep.name for ep in entry_points(group="aorta.collectors")}))}

PICKY = good_collector("picky") + '''
from aorta_core import SetupError

@hookimpl
def check_machine(options):
    if options.level == 2:
        raise SetupError("no accelerator here; run on a machine with one")
    if options.level == 3:
        raise RuntimeError("check bug")

@hookimpl
def collect_artifacts(artifact_dir, options, run):
    if options.level == 4:
        raise SetupError("its profiler failed to start in the payload, so nothing was measured")
    return []
'''


def _sweep(site, tmp_path: Path, *args: str):
    out, ran = tmp_path / "out", tmp_path / "ran"
    site.add("picky", PICKY)
    done = run_aorta(["sweep=repeat", "trials=1", "collector=picky", *args,
                      f"output={out}", "--", "touch", str(ran)], cwd=tmp_path,
                     env={**site.env, **ONLY_TEST_PLUGINS})
    return done, out, ran


@pytest.mark.parametrize("launcher", [
    [], pytest.param(["hydra/launcher=joblib"],
                     marks=needs("hydra_plugins.hydra_joblib_launcher"))], ids=["basic", "joblib"])
def test_a_machine_a_collector_cannot_measure_on_stops_the_sweep_before_it_starts(
        plugin_site, tmp_path: Path, launcher: list[str]):
    done, out, ran = _sweep(plugin_site, tmp_path, "-m", "collector.picky.level=1,2",
                            *launcher)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        "aorta: error: collector picky cannot measure on this machine: no accelerator here; "
        "run on a machine with one"])
    assert not out.exists() and not ran.exists()


@needs("hydra_plugins.hydra_submitit_launcher")
def test_cells_that_run_on_cluster_nodes_are_not_refused_for_the_planning_machine(
        plugin_site, tmp_path: Path):
    """``--cfg job`` prints the config and submits nothing."""
    done, _, _ = _sweep(plugin_site, tmp_path, "collector.picky.level=2",
                        "hydra/launcher=aorta_slurm", "--cfg", "job")
    assert done.returncode == 0, done.stderr
    assert "level: 2" in done.stdout and "cannot measure" not in done.stderr


def test_a_machine_check_that_fails_otherwise_refuses_only_its_cell(plugin_site, tmp_path: Path):
    done, out, ran = _sweep(plugin_site, tmp_path, "-m", "collector.picky.level=1,3")
    assert done.returncode == 1, done.stderr
    assert "collector.picky: check_machine failed: RuntimeError: check bug" in done.stderr
    assert [r["axes"]["collector.picky.level"] for r in records(out)] == ["1"] and ran.exists()


def test_a_profiler_that_did_not_start_in_the_payload_is_the_trials_error(plugin_site,
                                                                          tmp_path: Path):
    done, out, ran = _sweep(plugin_site, tmp_path, "collector.picky.level=4")
    assert done.returncode == 1, done.stderr
    (record,) = records(out)
    assert (record["verdict"], record["exit_code"]) == ("error", 0) and ran.exists()
    assert record["error"] == ("picky: its profiler failed to start in the payload, so nothing "
                               "was measured")
    assert record["metrics"]["picky_level"] == 4  # still parsed
    assert "picky" not in record["warnings"]
