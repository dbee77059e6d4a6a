"""``aorta_core.api.launch``: Python, torchrun and torch.distributed.run launches split and
rebuilt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_core.api.launch import TORCHRUN_FLAGS, PythonLaunch, interpreter, split_python

W = ("-m", "pkg.runner", "--out", "d")


@pytest.mark.parametrize(
    ("argv", "kind", "target", "wrapped"),
    [
        (["python", "-u", "t.py", "a"], "script", "t.py",
         ["python", "-u", *W, "t.py", "a"]),
        (["python3.12", "-X", "dev", "-Wignore", "-m", "pkg", "a"], "module", "pkg",
         ["python3.12", "-X", "dev", "-Wignore", *W, "-m", "pkg", "a"]),
        (["python", "-u", "-mpkg.train", "-q"], "module", "pkg.train",
         ["python", "-u", *W, "-m", "pkg.train", "-q"]),
        (["python", "-uBm", "pkg", "x"], "module", "pkg", ["python", "-uB", *W, "-m", "pkg", "x"]),
        (["python", "-c", "print(1)", "a"], "code", "print(1)",
         ["python", *W, "-c", "print(1)", "a"]),
        (["python", "-OO", "-", "a"], "stdin", "", ["python", "-OO", *W, "-", "a"]),
        (["torchrun", "--nproc-per-node", "2", "--standalone", "t.py", "a"], "script", "t.py",
         ["torchrun", "--nproc-per-node", "2", "--standalone", *W, "t.py", "a"]),
        (["/v/bin/torchrun", "--nproc_per_node=2", "-m", "pkg.train", "--lr", "1"], "module",
         "pkg.train",
         ["/v/bin/torchrun", "--nproc_per_node=2", *W, "-m", "pkg.train", "--lr", "1"]),
        (["torchrun", "--run-path", "--nnodes", "1", "--", "t.py"], "script", "t.py",
         ["torchrun", "--nnodes", "1", *W, "t.py"]),
        (["python", "-u", "-m", "torch.distributed.run", "--standalone", "-m", "pkg", "a"],
         "module", "pkg",
         ["python", "-u", "-m", "torch.distributed.run", "--standalone", *W, "-m", "pkg", "a"]),
    ],
)
def test_split_and_rebuild(argv, kind, target, wrapped):
    launch = split_python(argv)
    assert (launch.kind, launch.target) == (kind, target)
    assert list(launch.rebuild(*W)) == wrapped
    again = split_python(launch.rebuild())
    assert again == launch  # the rebuilt launch reads back the same


def test_parts_are_kept_as_given():
    launch = split_python(["python", "-X", "dev", "-Werror", "-u", "s.py", "-m", "x"])
    assert launch.python_options == (("-X", "dev"), ("-Werror",), ("-u",))
    assert launch.python_flags == ("-X", "dev", "-Werror", "-u")
    assert launch.args == ("-m", "x")
    run = split_python(["python", "-m", "torch.distributed.run", "--nnodes=1", "--no-python",
                        "./a.out", "-v"])
    assert (run.launcher, run.launcher_options, run.kind, run.target, run.args) == (
        "torch.distributed.run", ("--nnodes=1",), "program", "./a.out", ("-v",))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bash", "run.sh"], None),
        ([], None),
        (["python", "-u"], PythonLaunch("python", python_options=(("-u",),))),
        (["python", "-m"], PythonLaunch("python", kind="module")),
        (["torchrun", "--nnodes", "1"],
         PythonLaunch("torchrun", "torchrun", launcher_options=("--nnodes", "1"))),
    ],
)
def test_launches_without_a_target(argv, expected):
    assert split_python(argv) == expected


def test_nothing_python_to_wrap_is_refused():
    with pytest.raises(ValueError, match="no Python to wrap"):
        split_python(["torchrun", "--no-python", "./a.out"]).rebuild("-m", "r")
    assert split_python(["torchrun", "--no-python", "./a.out"]).rebuild() == (
        "torchrun", "--no-python", "./a.out")


def test_torchrun_flag_table_matches_torch():
    from torch.distributed.run import get_args_parser

    flags = {opt for action in get_args_parser()._actions if action.nargs == 0
             for opt in action.option_strings}
    assert flags == TORCHRUN_FLAGS


def test_interpreter_follows_path_shebangs_and_pip_trampolines(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    env = {"PATH": str(bin_dir)}
    assert interpreter(["python3", "x.py"], env) == str(python)
    tool = bin_dir / "torchrun"
    tool.write_text("#!/usr/bin/env python3\n")
    tool.chmod(0o755)
    assert interpreter(["torchrun", "x.py"], env) == str(python)
    tool.write_text(f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n")
    assert interpreter(["torchrun", "x.py"], env) == str(python)
    tool.write_text("#!/bin/bash\n")
    assert interpreter(["torchrun"], env) is None
    assert interpreter([], env) is None


def test_run_main_gives_the_payload_python_s_argv_and_path(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    show = "import sys; print(sys.argv, sys.path[0], __name__)\n"
    (pkg / "main.py").write_text(show)
    (tmp_path / "script.py").write_text(show)
    runner = "import sys; from aorta_core.api.launch import run_main; run_main(sys.argv[1:])"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    script = subprocess.run([sys.executable, "-c", runner, str(tmp_path / "script.py"), "a b"],
                            env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert script.stdout.split("\n")[0] == (
        f"[{str(tmp_path / 'script.py')!r}, 'a b'] {tmp_path} __main__")
    module = subprocess.run([sys.executable, "-c", runner, "-m", "pkg.main", "x"], env=env,
                            cwd=Path("/"), capture_output=True, text=True, check=True)
    assert module.stdout.startswith(f"[{str(pkg / 'main.py')!r}, 'x']")
    assert module.stdout.rstrip().endswith("__main__")


_ENDS_ITSELF = """
import atexit, pathlib, sys
from aorta_core.api.launch import exit_without_teardown
atexit.register(lambda: pathlib.Path(sys.argv[1]).write_text("atexit ran"))
print("unflushed line", end="")
exit_without_teardown(3)
print("never")
"""


def test_exit_without_teardown_keeps_the_status_the_atexit_work_and_the_output(tmp_path):
    script = tmp_path / "ends.py"
    script.write_text(_ENDS_ITSELF)
    mark = tmp_path / "mark"
    done = subprocess.run([sys.executable, str(script), str(mark)], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, mark.read_text()) == (3, "unflushed line", "atexit ran")
    # run by a runner (run_main), the payload's end is a SystemExit the runner sees, so the
    # runner's own work after its payload still runs
    runner = ("import sys; from aorta_core.api.launch import run_main\n"
              "try:\n    run_main(sys.argv[1:])\nexcept SystemExit as exc:\n"
              "    print(' runner saw', exc.code)\n")
    done = subprocess.run([sys.executable, "-c", runner, str(script), str(tmp_path / "m2")],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "unflushed line runner saw 3\n"), done.stderr
