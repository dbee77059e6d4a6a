"""Issue 23 item 4: core settings that used to pass validation and then crash a started trial
(``timeout=inf``, ``+env.X=[1,2]``, ...) are refused when the command line is composed: exit
status 2, one line naming the key, the value and what is accepted, nothing written. A timeout
that is merely large (30 days, 1e300 s) is honoured.

The payload is ``true``: no GPU is used, and the result is the same on a machine with one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import good_collector, records, run_aorta
from test_plugins import ONLY_TEST_PLUGINS

SECONDS = "is out of range: a finite number of seconds above 0; null for no limit"
HOOK_SECONDS = ("is out of range: a finite number of seconds above 0 up to 9223372036; null for "
                "no limit")
MIB = "is out of range: a finite number of MiB above 0"


@pytest.mark.parametrize(("override", "line"), [
    ("timeout=inf", f"timeout=inf {SECONDS}"),
    ("timeout=-inf", f"timeout=-inf {SECONDS}"),
    ("timeout=nan", f"timeout=nan {SECONDS}"),
    ("timeout=0", f"timeout=0 {SECONDS}"),
    ("timeout=-5", f"timeout=-5 {SECONDS}"),
    ("hook_timeout=inf", f"hook_timeout=inf {HOOK_SECONDS}"),
    ("hook_timeout=nan", f"hook_timeout=nan {HOOK_SECONDS}"),
    ("hook_timeout=0", f"hook_timeout=0 {HOOK_SECONDS}"),
    ("hook_timeout=1e12", f"hook_timeout=1e+12 {HOOK_SECONDS}"),
    ("read_limit_mb=nan", f"read_limit_mb=nan {MIB}"),
    ("read_limit_mb=inf", f"read_limit_mb=inf {MIB}"),
    ("read_limit_mb=-1", f"read_limit_mb=-1 {MIB}"),
    ("read_limit_mb=0", f"read_limit_mb=0 {MIB}"),
    ("trials=-1", "trials=-1 must be 1 or more"),
    ("trials=0", "trials=0 must be 1 or more"),
    ("+env.X=[1,2]", "env.X=[1, 2] is not text; quote it ('+env.X=\"...\"')"),
    ("+env.X={a:1}", "env.X={'a': 1} is not text; quote it ('+env.X=\"...\"')"),
    ("devices=[0,[1]]", "devices[1]=[1] is not text"),
    ("device_env=[CUDA_VISIBLE_DEVICES,[A]]", "device_env[1]=['A'] is not text"),
    ("device_env=['A=B']", "device_env[0]: 'A=B' is not a variable name (non-empty, without '=' "
                           "or NUL)"),
])
def test_a_value_that_would_crash_a_trial_is_refused_at_compose(tmp_path: Path, override: str,
                                                                 line: str) -> None:
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", override, f"output={out}", "--", "true"],
                     cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"aorta: error: {line}"]
    assert not out.exists()


def test_env_names_and_values_a_process_cannot_carry_are_refused(tmp_path: Path) -> None:
    """A recipe's ``env`` can hold what the command line cannot spell (``=`` in a name, NUL)."""
    (tmp_path / "recipes" / "sweep").mkdir(parents=True)
    for name, env, line in [
        ("eq", '{"A=B": "1"}', "env: 'A=B' is not a variable name (non-empty, without '=' or NUL)"),
        ("nul", '{X: "a\\0b"}', "env.X='a\\x00b' contains a NUL byte"),
    ]:
        (tmp_path / "recipes" / "sweep" / f"{name}.yaml").write_text(
            "# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params: {}\n"
            f"env: {env}\ncommand: [\"true\"]\n")
        out = tmp_path / f"out_{name}"
        done = run_aorta(["--config-dir", str(tmp_path / "recipes"), f"sweep={name}",
                          "trials=1", f"output={out}"], cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [f"aorta: error: {line}"]
        assert not out.exists()


@pytest.mark.parametrize("timeout", ["2592000", "1e300", "1.7e308"])
def test_a_large_finite_timeout_is_honoured(plugin_site, tmp_path: Path, timeout: str) -> None:
    plugin_site.add("good", good_collector("good"))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", f"timeout={timeout}", "hook_timeout=2592000",
                      "collector=good", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    assert [(r["verdict"], r["timed_out"]) for r in records(out)] == [("pass", False)] * 2
    assert (out / "matrix.json").is_file()
