"""The ``mode: cli`` runner and the ``mode: env`` payload helper, run for real in a subprocess.

This machine has Triton but no GPU. With ``TRITON_PROTON_DISABLE=1`` Proton's own ``start()`` is
a no-op and ``finalize()`` still runs, so everything except the profile itself is exercised:
exit codes, argv, ``sys.path``, pytest, folder creation. Without it, the real CPU-only failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import need

need("triton.profiler")  # the runner drives Triton's Proton

DISABLED = {**os.environ, "TRITON_PROTON_DISABLE": "1"}


def run_runner(tmp_path: Path, *target: str, env=None, flags=()) -> subprocess.CompletedProcess:
    name = tmp_path / "out" / "deeper" / "proton"
    argv = [sys.executable, "-m", "aorta_proton.cli_runner", "-n", str(name), *flags, *target]
    return subprocess.run(
        argv, cwd=tmp_path, env=env or DISABLED, capture_output=True, text=True, timeout=120
    )


def script(tmp_path: Path, body: str, name: str = "payload.py") -> str:
    path = tmp_path / "scripts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize(
    ("ending", "code"),
    [("raise SystemExit(0)", 0), ("sys.exit(3)", 3), ("pass", 0), ("raise ValueError('boom')", 1)],
)
def test_exit_status_is_the_payloads(tmp_path, ending, code):
    path = script(tmp_path, f"import sys\nprint('ran', __name__)\n{ending}\n")
    done = run_runner(tmp_path, path)
    assert done.returncode == code, done.stderr
    assert "ran __main__" in done.stdout
    if code == 1:
        assert "ValueError: boom" in done.stderr


def test_script_sees_its_argv_and_its_folder_on_sys_path(tmp_path):
    script(tmp_path, "VALUE = 42\n", name="helper.py")
    path = script(tmp_path, "import sys, helper\nprint(sys.argv, helper.VALUE)\n")
    done = run_runner(tmp_path, path, "--lr", "0.1", "-x")
    assert done.returncode == 0, done.stderr
    assert f"[{path!r}, '--lr', '0.1', '-x'] 42" in done.stdout


def test_name_folder_is_created(tmp_path):
    done = run_runner(tmp_path, script(tmp_path, "pass\n"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "deeper").is_dir()


@pytest.mark.parametrize(("assertion", "code"), [("1 == 2", 1), ("1 == 1", 0)])
def test_pytest_result_is_the_exit_status(tmp_path, assertion, code):
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "test_payload_case.py").write_text(f"def test_it():\n    assert {assertion}\n")
    done = run_runner(tmp_path, "pytest", "-q", "-p", "no:cacheprovider", str(tests))
    assert done.returncode == code, done.stdout + done.stderr
    assert ("1 failed" if code else "1 passed") in done.stdout


def test_usage_error_without_target(tmp_path):
    done = run_runner(tmp_path)
    assert done.returncode == 2
    assert "missing the script (or pytest) to profile" in done.stderr


def test_without_a_gpu_proton_itself_fails_loudly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_PROTON_DISABLE"}
    done = run_runner(tmp_path, script(tmp_path, "print('never')\n"), env=env)
    if "never" in done.stdout:
        pytest.skip("this machine has a GPU driver Triton can use")
    assert done.returncode == 1
    assert "active drivers" in done.stderr


PAYLOAD = """
import os, sys
from aorta_proton import payload
print("started", payload.start())
payload.finalize(); payload.finalize()
print("dir", os.path.isdir(os.environ.get("AORTA_PROTON_DIR", "/nonexistent")))
"""


def test_payload_helper_is_a_no_op_outside_aorta(tmp_path):
    env = {k: v for k, v in DISABLED.items() if not k.startswith("AORTA_PROTON_")}
    done = subprocess.run(
        [sys.executable, "-c", PAYLOAD], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "started False" in done.stdout


def test_payload_helper_starts_from_the_variables_and_creates_the_folder(tmp_path):
    folder = tmp_path / "proton"
    env = {
        **DISABLED,
        "AORTA_PROTON_DIR": str(folder),
        "AORTA_PROTON_NAME": str(folder / "p"),
        "AORTA_PROTON_BACKEND": "instrumentation",
        "AORTA_PROTON_MODE": "default",
    }
    done = subprocess.run(
        [sys.executable, "-c", PAYLOAD], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "started True" in done.stdout and "dir True" in done.stdout


def test_mode_strings_become_protons_typed_modes():
    from aorta_proton.session import proton_mode
    from triton.profiler import mode as modes

    assert proton_mode("cupti", "pcsampling:interval=500") == modes.PCSampling(interval=500)
    assert proton_mode("cupti", "pcsampling") == modes.PCSampling()
    assert proton_mode("instrumentation", "mma") == modes.MMA()
    assert proton_mode("instrumentation", "default:granularity=cta") == modes.Default(
        granularity="cta"
    )
    assert proton_mode("cupti", "periodic_flushing:format=hatchet") == (
        "periodic_flushing:format=hatchet"
    )
    assert proton_mode("cupti", None) is None
