"""Issue 23 item 3: a collector's ``wrap_argv`` that returns a launch no process can be started
from (an argument that is not text, a NUL byte, ``=`` in a variable name, an empty argv, ...) is
that trial's setup error, named in one line; the sweep goes on and writes the matrix.

One real sweep through the CLI sweeps the malformed shapes as cells of a test collector; each
shape is then checked as its own test. The payload is ``true``: no GPU is used, and the result is
the same on a machine with one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import PluginSite, records, run_aorta
from test_plugins import ONLY_TEST_PLUGINS

BAD = '''
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from aorta_core import CollectorInfo, Launch, hookimpl

class Unreadable(os.PathLike, Mapping):
    """A path and a mapping that raise when read."""
    def __fspath__(self):
        raise RuntimeError("no path")
    def __getitem__(self, key):
        raise KeyError(key)
    def __iter__(self):
        raise RuntimeError("no items")
    def __len__(self):
        return 1

@dataclass
class Options:
    shape: str = "ok"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="returns malformed launches", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    env = dict(launch.env)
    change = {
        "ok": {},
        "argv_none": {"argv": ("env", "A=1", None, *launch.argv)},
        "argv_int": {"argv": ("env", 3, *launch.argv)},
        "argv_nul": {"argv": ("env", "a\\0b", *launch.argv)},
        "argv_surrogate": {"argv": ("env", "\\ud800", *launch.argv)},
        "argv_empty": {"argv": ()},
        "argv_str": {"argv": "true"},
        "argv_bytes": {"argv": ("env", b"A=1", *launch.argv)},
        "argv_path": {"argv": (Path("/usr/bin/env"), *launch.argv)},
        "argv_huge": {"argv": ("env", *["A=" + "x" * 64] * 200_000, *launch.argv)},
        "env_nul_value": {"env": {**env, "X": "a\\0b"}},
        "env_nul_name": {"env": {**env, "X\\0Y": "1"}},
        "env_eq_name": {"env": {**env, "A=B": "1"}},
        "env_empty_name": {"env": {**env, "": "1"}},
        "env_int_value": {"env": {**env, "X": 1}},
        "env_none_value": {"env": {**env, "X": None}},
        "env_int_name": {"env": {**env, 1: "x"}},
        "env_list": {"env": ["X=1"]},
        "cwd_none": {"cwd": None},
        "cwd_nul": {"cwd": Path("/tmp/a\\0b")},
        "cwd_bytes": {"cwd": b"/tmp"},
        "cwd_unreadable": {"cwd": Unreadable()},
        "env_unreadable": {"env": Unreadable()},
    }
    if options.shape == "not_launch":
        return tuple(launch.argv)
    return dataclasses.replace(launch, **change[options.shape])
'''

#: Shape -> the trial's error: the collector, the hook and the bad item, in one line.
EXPECTED = {
    "argv_none": "argv[2] is None (must be str)",
    "argv_int": "argv[1] is int 3 (must be str)",
    "argv_nul": "argv[1] contains a NUL byte",
    "argv_surrogate": "argv[1] cannot be encoded for the operating system ('\\ud800')",
    "argv_empty": "argv is empty (must name a program)",
    "argv_str": "argv is str (must be a tuple of str)",
    "argv_bytes": "argv[1] is bytes b'A=1' (must be str)",
    "argv_path": "argv[0] is PosixPath PosixPath('/usr/bin/env') (must be str)",
    "env_nul_value": "env['X'] contains a NUL byte",
    "env_nul_name": "the name of env['X\\x00Y'] contains a NUL byte",
    "env_eq_name": "the name of env['A=B'] is empty or contains '='",
    "env_empty_name": "the name of env[''] is empty or contains '='",
    "env_int_value": "env['X'] is int 1 (must be str)",
    "env_none_value": "env['X'] is None (must be str)",
    "env_int_name": "the name of env[1] is int 1 (must be str)",
    "env_list": "env is list (must be a mapping of str to str)",
    "cwd_none": "cwd is NoneType (must be a path)",
    "cwd_nul": "cwd contains a NUL byte",
    "cwd_bytes": "cwd is bytes (must be a path)",
    "cwd_unreadable": "cannot be read (RuntimeError raised while reading it)",
    "env_unreadable": "cannot be read (RuntimeError raised while reading it)",
}
#: Shape -> the trial's error: a launch every item of which is valid, that the OS cannot start.
UNSTARTABLE = {"argv_huge": "cannot start 'env': Argument list too long"}
TRIALS = 2


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[object, Path]:
    root = tmp_path_factory.mktemp("launches")
    site = PluginSite(root / "site")
    site.add("bad", BAD)
    out = root / "out"
    shapes = ",".join(["ok", "not_launch", *EXPECTED, *UNSTARTABLE])
    done = run_aorta(["-m", "sweep=repeat", f"trials={TRIALS}", "collector=bad",
                      f"collector.bad.shape={shapes}", f"output={out}", "--", "true"],
                     cwd=root, env={**site.env, **ONLY_TEST_PLUGINS}, timeout=300)
    return done, out


def _by_shape(out: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for rec in records(out):
        found.setdefault(rec["axes"]["collector.bad.shape"], []).append(rec)
    return found


def test_the_sweep_goes_on_and_writes_the_matrix(sweep) -> None:
    done, out = sweep
    assert done.returncode == 1, done.stderr  # setup errors; the good cell passed
    assert "Traceback" not in done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    cells = {c["axes"]["collector.bad.shape"]: c["trials"] for c in matrix["cells"]}
    assert cells["ok"]["pass"] == TRIALS
    assert all(cells[shape]["error"] == TRIALS
               for shape in ["not_launch", *EXPECTED, *UNSTARTABLE])
    assert [r["verdict"] for r in _by_shape(out)["ok"]] == ["pass"] * TRIALS


@pytest.mark.parametrize("shape", ["not_launch", *EXPECTED])
def test_a_malformed_launch_is_that_trials_setup_error(sweep, shape: str) -> None:
    _, out = sweep
    expected = (f"bad: wrap_argv returned an invalid launch: {EXPECTED[shape]}"
                if shape in EXPECTED else "bad: wrap_argv returned tuple, not a Launch")
    trials = _by_shape(out)[shape]
    assert sorted(r["trial"] for r in trials) == list(range(TRIALS))
    for rec in trials:
        assert (rec["verdict"], rec["error"], rec["exit_code"]) == ("error", expected, None)
        assert rec["argv_run"] == rec["argv"] == ["true"]  # nothing of the bad launch ran


def test_a_launch_the_system_cannot_start_is_that_trials_error(sweep) -> None:
    _, out = sweep
    for shape, error in UNSTARTABLE.items():
        assert [(r["verdict"], r["error"]) for r in _by_shape(out)[shape]] == [("error", error)] * 2
