"""Collector plugins as real distributions: discovery, isolation, hook calls, options."""

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
from needs import needs

#: Keep every collector installed in this environment (whichever they are) out of these tests' way.
INSTALLED = sorted({ep.name for ep in entry_points(group="aorta.collectors")})
ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": ",".join(INSTALLED)}


def _env(site) -> dict[str, str]:
    return {**site.env, **ONLY_TEST_PLUGINS}


def _plugins(site, tmp_path, extra=None) -> dict[str, dict]:
    done = run_aorta(["plugins", "--json"], cwd=tmp_path, env={**_env(site), **(extra or {})})
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in json.loads(done.stdout)}


def test_broken_plugin_is_reported_and_the_others_keep_working(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("broken", "import no_such_module_anywhere\n", version="9.9")
    rows = _plugins(plugin_site, tmp_path)
    assert rows["good"]["status"] == "ok" and rows["good"]["distribution"] == "aorta-test-good"
    assert rows["good"]["times_comparable"] is True and rows["good"]["wrap_order"] == 50
    assert rows["broken"] == {
        "name": "broken", "distribution": "aorta-test-broken", "version": "9.9",
        "status": "error", "description": None, "times_comparable": None, "wrap_order": None,
        "commands": [],
        "error": "ModuleNotFoundError: No module named 'no_such_module_anywhere'",
    }
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=good", f"output={out}", "--", "true"],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    assert "collector broken (aorta-test-broken 9.9) is unusable" in done.stderr
    (rec,) = records(out)
    assert rec["verdict"] == "pass" and rec["metrics"]["good_level"] == 1


def test_strict_mode_and_disable_list(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("broken", "raise RuntimeError('bad import')\n")
    done = run_aorta(["plugins"], cwd=tmp_path,
                     env={**_env(plugin_site), "AORTA_STRICT_PLUGINS": "1"})
    assert done.returncode == 2
    assert "collector 'broken' (aorta-test-broken 0.3.1) failed to load: RuntimeError: bad import" \
        in done.stderr
    rows = _plugins(plugin_site, tmp_path,
                    {"AORTA_DISABLE_PLUGINS": ",".join(["broken", *INSTALLED])})
    assert rows["broken"]["status"] == "disabled" and rows["good"]["status"] == "ok"


def test_allow_list_loads_only_the_named_collectors(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("other", good_collector("other"))
    plugin_site.add("broken", "raise RuntimeError('bad import')\n")
    done = run_aorta(["plugins", "--json"], cwd=tmp_path,
                     env={**plugin_site.env, "AORTA_LOAD_PLUGINS": "good",
                          "AORTA_STRICT_PLUGINS": "1"})
    assert done.returncode == 0, done.stderr  # the broken one is never imported
    rows = {row["name"]: row["status"] for row in json.loads(done.stdout)}
    assert rows.pop("good") == "ok"
    assert set(rows.values()) == {"disabled"} and {"other", "broken"} <= set(rows)


def test_misspelled_hook_is_an_error(plugin_site, tmp_path: Path):
    source = good_collector("typo").replace("def wrap_argv(", "def wrap_arvg(")
    plugin_site.add("typo", source)
    rows = _plugins(plugin_site, tmp_path)
    assert rows["typo"]["status"] == "error"
    assert "unknown hook 'wrap_arvg'" in rows["typo"]["error"]
    where = plugin_site.root / "aorta_test_typo" / "plugin.py"
    assert f"in {where}; did you mean wrap_argv?" in rows["typo"]["error"]


def test_load_errors_name_what_to_fix(plugin_site, tmp_path: Path):
    """A syntax error names the whole path; an entry point naming an object of the module (not
    the module) names the value to write instead."""
    plugin_site.add("syntax", "def broken(:\n")
    plugin_site.add("cls", good_collector("cls"))
    points = next(plugin_site.root.glob("aorta_test_cls-*.dist-info")) / "entry_points.txt"
    points.write_text("[aorta.collectors]\ncls = aorta_test_cls.plugin:Options\n")
    rows = _plugins(plugin_site, tmp_path)
    assert rows["syntax"]["error"] == (
        f"SyntaxError: invalid syntax ({plugin_site.root / 'aorta_test_syntax' / 'plugin.py'}, "
        "line 1)")
    assert rows["cls"]["error"] == (
        "TypeError: entry point cls = 'aorta_test_cls.plugin:Options' holds no aorta_collector "
        "hook: it must name the module of your @hookimpl functions, e.g. cls = "
        "'aorta_test_cls.plugin' (docs/plugins.md#packaging)")


def test_a_selected_broken_collector_is_said_once(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("broken", "import no_such_module_anywhere\n")
    done = run_aorta(["sweep=repeat", "collector=broken,good", "-m", "--", "true"],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2
    assert done.stderr.count("collector broken (aorta-test-broken 0.3.1) is unusable") == 1
    assert "aorta: error: collector broken" in done.stderr


def test_a_collector_in_a_near_miss_entry_point_group_is_named(plugin_site, tmp_path: Path):
    plugin_site.add("grp", good_collector("grp"))
    points = next(plugin_site.root.glob("aorta_test_grp-*.dist-info")) / "entry_points.txt"
    points.write_text("[aorta.collector]\ngrp = aorta_test_grp.plugin\n")
    done = run_aorta(["sweep=repeat", "collector=grp", "--", "true"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 2
    assert ("aorta: error: collector grp is declared by aorta-test-grp 0.3.1 in the entry-point "
            "group 'aorta.collector', which aorta does not read: name the group "
            "'aorta.collectors' ([project.entry-points.\"aorta.collectors\"]) and install it "
            "again") in done.stderr


def test_a_collector_without_wrap_argv_is_an_error(plugin_site, tmp_path: Path):
    """Refused at load with the reason, not as a wrong return type in every trial."""
    source = good_collector("nowrap").replace("@hookimpl\ndef wrap_argv(", "def wrap_argv(")
    plugin_site.add("nowrap", source)
    rows = _plugins(plugin_site, tmp_path)
    assert rows["nowrap"]["status"] == "error"
    assert rows["nowrap"]["error"] == ("TypeError: no wrap_argv hook: a collector must return "
                                       "the launch it measures (unchanged when the workload "
                                       "measures itself)")


def test_plugins_table_is_human_readable(plugin_site, tmp_path: Path):
    """One row per collector, its cells under the header's columns: a working one says ``ok``
    and its description, a broken one ``error`` and why, in name order."""
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("broken", "raise ImportError('needs libfoo 2')\n", version="1.0.0")
    done = run_aorta(["plugins"], cwd=tmp_path, env={**_env(plugin_site), "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    rows = [[c.strip() for c in line.strip("│").split("│")]
            for line in done.stdout.splitlines() if line.startswith("│")]
    header = [c.strip() for c in done.stdout.splitlines()[2].strip("┃").split("┃")]
    assert header == ["name", "distribution", "version", "status", "error / description"]
    names = [r[0] for r in rows if r[0]]
    assert names == sorted(names) and {"broken", "good"} <= set(names)
    broken, good = (next(r for r in rows if r[0] == n) for n in ("broken", "good"))
    assert good == ["good", "aorta-test-good", "0.3.1", "ok", "test collector"]
    assert broken[:4] == ["broken", "aorta-test-broken", "1.0.0", "error"]
    assert "needs libfoo 2" in broken[4]


def test_two_collectors_wrap_in_order_and_both_parse(plugin_site, tmp_path: Path):
    plugin_site.add("outer", good_collector("outer", order=10))
    plugin_site.add("inner", good_collector("inner", order=30))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=[inner,outer]",
                      "collector.outer.level=7", f"output={out}", "--", "true"],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    (rec,) = records(out)
    assert rec["argv_run"] == ["env", "outer_WRAPPED=1", "env", "inner_WRAPPED=1", "true"]
    assert rec["metrics"]["outer_level"] == 7 and rec["metrics"]["inner_level"] == 1
    trial_dir = out / "cells" / rec["cell"] / "trial_000"
    assert rec["metrics"]["inner_artifact_dir"] == str(trial_dir / "inner")
    assert (trial_dir / "outer" / "wrapped.txt").read_text() == "outer"
    assert rec["collectors"]["outer"]["options"] == {"level": 7}
    assert rec["collectors"]["outer"]["artifacts"] == ["outer/wrapped.txt"]  # listed by the core
    assert rec["collectors"]["outer"]["version"] == "0.3.1"


def test_option_typos_and_bad_types_fail_at_compose_naming_the_key(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "collector=good", "collector.good.levle=2", f"output={out}",
                      "--", "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line == ("aorta: error: collector.good.levle is not a setting; "
                    "did you mean `collector.good.level`?")
    done = run_aorta(["sweep=repeat", "collector=good", "collector.good.level=high",
                      f"output={out}", "--", "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2
    assert "Value 'high' of type 'str' could not be converted to Integer; " \
        "full_key: collector.good.level" in done.stderr
    assert not (out / "cells").exists()


def test_unknown_collector_lists_the_installed_ones(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    done = run_aorta(["sweep=repeat", "collector=nope", "--", "true"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 2
    assert "Could not find 'collector/nope'; Available options in 'collector': good" in done.stderr


VALIDATING = good_collector("picky") + '''
from aorta_core import OptionError

@hookimpl
def check_options(options, selected):
    if options.level > 3:
        raise OptionError(f"level={options.level} is too high; use 1, 2 or 3")
'''


def test_check_options_stops_the_cell_before_anything_runs(plugin_site, tmp_path: Path):
    plugin_site.add("picky", VALIDATING)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "collector=picky", "collector.picky.level=9",
                      f"output={out}", "--", "touch", str(tmp_path / "ran")],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 1
    assert "collector.picky: level=9 is too high; use 1, 2 or 3" in done.stderr
    assert not (tmp_path / "ran").exists()


FAULTY = good_collector("faulty") + '''
from aorta_core import SetupError

@hookimpl
def collect_artifacts(artifact_dir, options, run):
    (artifact_dir / "late.txt").write_text(str(run.returncode))
    return [artifact_dir / "late.txt"]

def _wrap(launch, options, artifact_dir):
    if options.level == 2:
        raise SetupError("profiler binary missing; set FAULTY_BIN")
    if options.level == 3:
        raise RuntimeError("plugin bug")
    return launch

def _parse(artifact_dir, options):
    import warnings
    if options.level == 1:
        raise ValueError("cannot parse")
    warnings.warn("artifact partly unreadable")
    return {"faulty_ok": 1.5, "faulty_nan": float("nan"), "unprefixed": 3, "faulty_obj": {"a": 1}}

wrap_argv = hookimpl(_wrap)
parse_metrics = hookimpl(_parse)
'''


def test_hook_failures_are_isolated_to_the_collector_and_trial(plugin_site, tmp_path: Path):
    plugin_site.add("faulty", FAULTY.replace("@hookimpl\ndef wrap_argv", "def _unused_wrap")
                    .replace("@hookimpl\ndef parse_metrics", "def _unused_parse"))
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=faulty",
                      "collector.faulty.level=1,2,3,4", f"output={out}", "--", "true"],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 1, done.stderr  # two cells errored; the sweep went on
    by_level = {r["axes"]["collector.faulty.level"]: r for r in records(out)}
    assert by_level["1"]["verdict"] == "pass"
    assert "parse_metrics failed: ValueError: cannot parse" in by_level["1"]["warnings"]["faulty"]
    assert by_level["1"]["collectors"]["faulty"]["artifacts"] == ["faulty/late.txt"]
    assert by_level["2"]["verdict"] == "error"
    assert by_level["2"]["error"] == "faulty: profiler binary missing; set FAULTY_BIN"
    assert by_level["3"]["error"] == "faulty: RuntimeError: plugin bug"
    four = by_level["4"]
    assert four["verdict"] == "pass"
    assert four["metrics"]["faulty_ok"] == 1.5
    assert "faulty_nan" not in four["metrics"] and "unprefixed" not in four["metrics"]
    assert "faulty_obj" not in four["metrics"]
    notes = four["warnings"]["faulty"]
    assert "artifact partly unreadable" in notes
    assert "metric 'unprefixed' lacks the faulty_ prefix; dropped" in notes
    assert "faulty: profiler binary missing; set FAULTY_BIN" in done.stderr


def test_glob_sweeps_every_installed_collector(plugin_site, tmp_path: Path):
    plugin_site.add("one", good_collector("one"))
    plugin_site.add("two", good_collector("two"))
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=glob(*)", f"output={out}",
                      "--", "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert sorted(c["axes"]["collector"] for c in matrix["cells"]) == ["one", "two"]
    assert {c["collectors"][0] for c in matrix["cells"]} == {"one", "two"}


def test_retention_prunes_after_parsing_and_records_it(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=good", "retain.on_pass=log",
                      f"output={out}", "--", "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    (rec,) = records(out)
    assert rec["metrics"]["good_files"] == 1
    assert rec["retention"] == {"level": "log", "deleted": ["good/"]}
    trial_dir = out / "cells" / rec["cell"] / "trial_000"
    assert not (trial_dir / "good").exists() and (trial_dir / "stdout.log").exists()


def test_parse_subcommand_prints_metrics_as_json(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    folder = tmp_path / "artifacts"
    folder.mkdir()
    (folder / "a.txt").write_text("x")
    done = run_aorta(["parse", "good", str(folder)], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"good_level": 1, "good_files": 1,
                                       "good_artifact_dir": str(folder)}
    done = run_aorta(["parse", "good", str(folder), "level=4"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert json.loads(done.stdout)["good_level"] == 4
    done = run_aorta(["parse", "good", str(folder), "levle=4"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 2 and "bad option for good: Key 'levle' not in" in done.stderr
    done = run_aorta(["parse", "nope", str(folder)], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2 and "unknown collector 'nope'; installed: good" in done.stderr


def test_a_collector_s_warning_names_it_once(plugin_site, tmp_path: Path):
    """Collectors often start their warnings with their own name; the console says it once."""
    source = good_collector("loud").replace(
        "def parse_metrics(artifact_dir, options):\n",
        "def parse_metrics(artifact_dir, options):\n"
        "    import warnings\n"
        "    warnings.warn('loud: named by itself')\n"
        "    warnings.warn('not named')\n")
    plugin_site.add("loud", source)
    folder = tmp_path / "artifacts"
    folder.mkdir()
    done = run_aorta(["parse", "loud", str(folder)], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["aorta: warning: loud: named by itself",
                                        "aorta: warning: loud: not named"]


def test_appended_unknown_option_is_refused_too(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"))
    done = run_aorta(["sweep=repeat", "collector=good", "+collector.good.levle=2",
                      f"output={tmp_path / 'out'}", "--", "touch", str(tmp_path / "ran")],
                     cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line == "aorta: error: collector.good.levle is not an option of good; valid: level"
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ran").exists()


def test_parse_subcommand_shows_what_a_trial_would_record(plugin_site, tmp_path: Path):
    plugin_site.add("faulty", FAULTY.replace("@hookimpl\ndef wrap_argv", "def _unused_wrap")
                    .replace("@hookimpl\ndef parse_metrics", "def _unused_parse"))
    folder = tmp_path / "artifacts"
    folder.mkdir()
    done = run_aorta(["parse", "faulty", str(folder), "level=4"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"faulty_ok": 1.5, "faulty_artifact_dir": str(folder)}
    assert "faulty: metric 'unprefixed' lacks the faulty_ prefix; dropped" in done.stderr
    done = run_aorta(["parse", "faulty", str(folder), "level=1"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"faulty_artifact_dir": str(folder)}
    assert "faulty: parse_metrics failed: ValueError: cannot parse" in done.stderr


# -- packaging: the docs' example plugin built as a wheel, and collectors whose option is broken --

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "plugin"
DOC = EXAMPLE.parent.parent / "docs" / "plugins.md"
#: The example's files docs/plugins.md shows, with the language of each block: all of them.
SHOWN = {"pyproject.toml": "toml", "aorta_pyinstrument.py": "python"}
MISSING_FIX = ("collector/preset.yaml is missing from package aorta_test_preset.conf: add it as "
               "package data (docs/plugins.md#packaging)")


def test_the_docs_show_the_example_plugin_verbatim():
    text = DOC.read_text(encoding="utf-8")
    for name, language in SHOWN.items():
        source = (EXAMPLE / name).read_text(encoding="utf-8")
        assert f"```{language}\n{source}```" in text, f"docs/plugins.md differs from {name}"
    module = (EXAMPLE / "aorta_pyinstrument.py").read_text(encoding="utf-8")
    assert len(module.splitlines()) <= 64  # a whole collector, exit status and teardown included


def _example_wheel(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Build a copy of the example as users do (``pip wheel``) and install the wheel into a
    private site folder; (the copy, the environment that loads the wheel's collector alone).
    The copy's module is deleted after the build, so that only the wheel can be imported."""
    src = Path(shutil.copytree(EXAMPLE, tmp_path / "src", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__")))
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir",
                    str(wheels), str(src)], check=True, cwd=tmp_path, timeout=300)
    (wheel,) = wheels.glob("aorta_pyinstrument-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, cwd=tmp_path, timeout=300)
    (src / "aorta_pyinstrument.py").unlink()
    return src, {"PYTHONPATH": str(site), "AORTA_LOAD_PLUGINS": "pyinstrument"}


def test_the_example_wheel_is_one_module_whose_option_is_generated(tmp_path: Path):
    _, env = _example_wheel(tmp_path)
    site = tmp_path / "site"
    installed = {p.name for p in site.iterdir()} - {"__pycache__"}
    assert {n for n in installed if not n.endswith(".dist-info")} == {"aorta_pyinstrument.py"}
    done = run_aorta(["plugins", "--json"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in json.loads(done.stdout) if r["name"] == "pyinstrument"]
    assert (row["status"], row["distribution"], row["version"]) == (
        "ok", "aorta-pyinstrument", "0.1.0")
    refused = run_aorta(["sweep=repeat", "trials=1", "collector=pyinstrument",
                         "collector.pyinstrument.interval_ms=fast", f"output={tmp_path / 'o'}",
                         "--", sys.executable, "-c", "pass"], cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "Value 'fast' of type 'str' could not be converted to Float; full_key: " \
           "collector.pyinstrument.interval_ms" in refused.stderr.splitlines()[-1]


@needs("pyinstrument")
def test_the_example_plugins_own_tests_pass_against_its_wheel(tmp_path: Path):
    """Its tests (aorta_core.testing's fixture: a Python script, two torchrun ranks on gloo, an
    asyncio program, a refused command) run against the installed wheel, as nox's third_party
    session runs them."""
    src, env = _example_wheel(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-c", str(src / "pyproject.toml"), str(src / "tests")], cwd=tmp_path,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout, done.stdout


def test_a_collector_whose_yaml_is_missing_is_an_error_with_the_fix(plugin_site, tmp_path: Path):
    """A collector that names a config package (YAML presets) in a wheel built without its
    package data: the package is there, its YAML is not."""
    plugin_site.add("preset", good_collector("preset"))
    (plugin_site.root / "aorta_test_preset" / "conf" / "collector" / "preset.yaml").unlink()
    row = _plugins(plugin_site, tmp_path)["preset"]
    assert row["status"] == "error" and row["error"].endswith(MISSING_FIX), row
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=preset", f"output={out}", "--",
                      "true"], cwd=tmp_path, env=_env(plugin_site))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"aorta: error: collector preset (aorta-test-preset 0.3.1) is unusable: {row['error']}")
    assert not out.exists()


@pytest.mark.parametrize(("text", "problem"), [
    ("level: [1\n", "is not valid YAML at line 2: expected ',' or ']', but got '<stream end>'; "
                    "fix the file"),
    # A comment above the header hides it from Hydra: the options would land in `collector`.
    ("# options of bad\n# @package collector.bad\nlevel: 2\n",
     "must start with the line `# @package collector.bad` (docs/plugins.md#packaging)"),
])
def test_a_collector_whose_option_file_is_broken_is_an_error(plugin_site, tmp_path: Path,
                                                              text: str, problem: str):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("bad", good_collector("bad"), yaml=text)
    rows = _plugins(plugin_site, tmp_path)
    assert rows["good"]["status"] == "ok" and rows["bad"]["status"] == "error"
    assert rows["bad"]["error"] == (
        f"CollectorConfigError: collector/bad.yaml of package aorta_test_bad.conf {problem}")
    done = run_aorta(["sweep=repeat", "trials=1", "collector=[good,bad]",
                      f"output={tmp_path / 'out'}", "--", "true"], cwd=tmp_path,
                     env=_env(plugin_site))
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"aorta: error: collector bad (aorta-test-bad 0.3.1) is unusable: {rows['bad']['error']}")
