"""A collector without a config package (``CollectorInfo.config_package`` left ``None``): the
core generates its ``collector/<name>`` option from its options dataclass, and it composes,
types, sweeps and lists as a collector that ships YAML. Real CLI runs with collectors installed
as real distributions; any machine (the workload is ``true``/``sh``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from cli_helpers import good_collector, records, run_aorta

from aorta_core.testing import SweepRunner

#: Keep every collector installed in this environment out of these tests' way.
ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": ",".join(
    sorted({ep.name for ep in entry_points(group="aorta.collectors")}))}

#: The two-file way: options, wrap, metrics; no YAML, no config package.
GENERATED = '''
import dataclasses
from aorta_core import CollectorInfo, hookimpl

@dataclasses.dataclass
class Options:
    level: int = 1
    label: str = "plain"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="option generated from its dataclass", options=Options)

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    return {"gen_level": options.level, "gen_label": options.label}
'''


@pytest.fixture
def site(plugin_site):
    """``gen`` (generated option) beside ``good`` (YAML option), both installed."""
    plugin_site.add("gen", GENERATED)
    shutil.rmtree(plugin_site.root / "aorta_test_gen" / "conf")  # nothing for Hydra to find
    plugin_site.add("good", good_collector("good"))
    return plugin_site


def _env(site) -> dict[str, str]:
    return {**site.env, **ONLY_TEST_PLUGINS}


def test_it_is_listed_ok_and_named_by_help(site, tmp_path: Path):
    listed = run_aorta(["plugins", "--json"], cwd=tmp_path, env=_env(site))
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert (rows["gen"]["status"], rows["gen"]["error"]) == ("ok", None)
    helped = run_aorta(["--help"], cwd=tmp_path, env=_env(site))
    assert helped.returncode == 0, helped.stderr
    assert "collector: gen, good\n" in helped.stdout


def test_its_defaults_and_overrides_reach_the_hooks(site, tmp_path: Path):
    sweep = SweepRunner(tmp_path)
    plain = sweep("sweep=repeat", "trials=1", "collector=gen", "--", "true",
                  env=_env(site)).assert_ok()
    assert _metrics(plain.records) == [{"gen_level": 1, "gen_label": "plain"}]
    given = sweep("sweep=repeat", "trials=1", "collector=[good,gen]", "collector.gen.level=3",
                  "collector.gen.label=x y", "--", "true", env=_env(site)).assert_ok()
    (record,) = given.records
    assert record.collectors["gen"].options == {"level": 3, "label": "x y"}
    assert record.metrics["gen_level"] == 3 and record.metrics["good_level"] == 1


def _metrics(found) -> list[dict]:
    return [{k: v for k, v in r.metrics.items() if not k.endswith("_artifact_dir")}
            for r in found]


@pytest.mark.parametrize(("override", "error"), [
    ("collector.gen.levle=3",
     "aorta: error: collector.gen.levle is not a setting; did you mean `collector.gen.level`?"),
    ("collector.gen.level=many",
     "aorta: error: Error merging override collector.gen.level=many; Value 'many' of type 'str' "
     "could not be converted to Integer; full_key: collector.gen.level; object_type=Options "
     "(python -m aorta_core --help lists recipes, workloads and collectors)"),
    ("+collector.gen.extra=1",
     "aorta: error: collector.gen.extra is not an option of gen; valid: label, level"),
])
def test_unknown_and_ill_typed_options_are_refused_as_for_yaml(site, tmp_path: Path,
                                                                override: str, error: str):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=gen", override, f"output={out}",
                      "--", "true"], cwd=tmp_path, env=_env(site))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == error
    yaml_done = run_aorta(["sweep=repeat", "trials=1", "collector=good",
                           override.replace(".gen.", ".good.").replace("label", "level"),
                           f"output={out}", "--", "true"], cwd=tmp_path, env=_env(site))
    assert yaml_done.returncode == 2  # the YAML collector: the same line, its own names
    assert yaml_done.stderr.splitlines()[-1].replace("good", "gen") == error.replace(
        "valid: label, level", "valid: level")
    assert not out.exists()


@pytest.mark.parametrize("selection", ["collector=gen,good", "collector=glob(*)"])
def test_multirun_and_glob_select_it_as_any_option(site, tmp_path: Path, selection: str):
    result = SweepRunner(tmp_path)("-m", "sweep=repeat", "trials=1", selection, "--", "true",
                                   env=_env(site)).assert_ok()
    assert sorted(r.cell for r in result.records) == ["collector=gen", "collector=good"]


def test_an_options_type_hydra_cannot_take_is_a_load_error(plugin_site, tmp_path: Path):
    plugin_site.add("gen", GENERATED.replace('label: str = "plain"',
                                             "label: set = dataclasses.field(default_factory=set)"))
    plugin_site.add("good", good_collector("good"))
    listed = run_aorta(["plugins", "--json"], cwd=tmp_path, env=_env(plugin_site))
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["good"]["status"] == "ok" and rows["gen"]["status"] == "error"
    assert rows["gen"]["error"] == ("TypeError: CollectorInfo.options Options is not a valid "
                                    "config schema: Unexpected type annotation: set")
    done = run_aorta(["sweep=repeat", "trials=1", "collector=good", f"output={tmp_path / 'o'}",
                      "--", "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr  # the others still sweep
    assert [r["verdict"] for r in records(tmp_path / "o")] == ["pass"]


def test_the_testing_fixture_works_from_a_plugin_conftest(site, tmp_path: Path):
    """``pytest_plugins = ["aorta_core.testing"]`` in a conftest gives ``aorta_sweep``; a failed
    sweep's ``assert_ok`` names the command, each failed trial's error and stderr's end."""
    tests = tmp_path / "plugin_tests"
    tests.mkdir()
    (tests / "pytest.ini").write_text("[pytest]\n")
    (tests / "conftest.py").write_text('pytest_plugins = ["aorta_core.testing"]\n')
    (tests / "test_gen.py").write_text(
        "def test_passes(aorta_sweep):\n"
        "    result = aorta_sweep('sweep=repeat', 'trials=1', 'collector=gen',\n"
        "                         'collector.gen.level=4', '--', 'true', collectors=['gen'])\n"
        "    (record,) = result.assert_ok().records\n"
        "    assert record.metrics['gen_level'] == 4\n\n\n"
        "def test_fails(aorta_sweep):\n"
        "    aorta_sweep('sweep=repeat', 'trials=1', 'collector=gen', '--', 'sh', '-c',\n"
        "                'echo broken >&2; exit 3', collectors=['gen']).assert_ok()\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           str(tests)], cwd=tests, env={**os.environ, **site.env},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout, done.stdout
    assert "E       AssertionError: aorta sweep exited 1 (a trial failed or a cell was " \
           "refused): output=" in done.stdout
    message = done.stdout[done.stdout.index("AssertionError: aorta sweep exited 1"):]
    assert "\nE         collector=gen trial 0: fail: exit code 3: broken\n" in message, message
    assert "\nE       stderr (last " in message, message
