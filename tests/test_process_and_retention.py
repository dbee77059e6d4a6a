"""Process-group handling and retention levels, exercised on real processes and files."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from aorta_core.api.contracts import Launch
from aorta_core.engine.process import run_launch
from aorta_core.engine.retention import prune


def _launch(code: str, tmp_path: Path) -> Launch:
    return Launch(argv=(sys.executable, "-c", code), env=dict(os.environ), cwd=tmp_path)


def test_exit_code_and_logs_are_kept(tmp_path: Path):
    out, err = tmp_path / "o", tmp_path / "e"
    outcome = run_launch(_launch("import sys; print('hi'); print('oops', file=sys.stderr); "
                                 "sys.exit(4)", tmp_path), out, err, timeout_s=30)
    assert (outcome.returncode, outcome.timed_out) == (4, False)
    assert out.read_text() == "hi\n" and err.read_text() == "oops\n"


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path, monkeypatch):
    import aorta_core.engine.process as process

    monkeypatch.setattr(process, "TERMINATE_GRACE_S", 0.5)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    start = time.perf_counter()
    outcome = run_launch(_launch(code, tmp_path), tmp_path / "o", tmp_path / "e", timeout_s=0.5)
    assert outcome.timed_out and outcome.returncode is None
    assert time.perf_counter() - start < 10


def test_leftover_children_are_ended_after_a_normal_exit(tmp_path: Path):
    pidfile = tmp_path / "pid"
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
            f"'import time; time.sleep(60)']); open({str(pidfile)!r}, 'w').write(str(p.pid))")
    outcome = run_launch(_launch(code, tmp_path), tmp_path / "o", tmp_path / "e", timeout_s=30)
    assert outcome.returncode == 0
    pid = int(pidfile.read_text())
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("orphaned child survived its trial")


def test_missing_program_raises_oserror(tmp_path: Path):
    launch = Launch(argv=("definitely-not-a-program",), env=dict(os.environ), cwd=tmp_path)
    with pytest.raises(FileNotFoundError):
        run_launch(launch, tmp_path / "o", tmp_path / "e", timeout_s=5)


def _trial(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    trial = tmp_path / "trial_000"
    art = trial / "prof"
    art.mkdir(parents=True)
    (art / "small.csv").write_bytes(b"x" * 10)
    (art / "big.json").write_bytes(b"x" * (2 << 20))
    logs = [trial / "stdout.log", trial / "stderr.log"]
    for log in logs:
        log.write_text("log")
    return trial, art, logs


@pytest.mark.parametrize(
    ("level", "deleted", "left"),
    [
        ("full", [], {"prof/small.csv", "prof/big.json", "stdout.log", "stderr.log"}),
        ("summary", ["prof/big.json"], {"prof/small.csv", "stdout.log", "stderr.log"}),
        ("log", ["prof/"], {"stdout.log", "stderr.log"}),
        ("none", ["prof/", "stdout.log", "stderr.log"], set()),
    ],
)
def test_retention_levels(tmp_path: Path, level, deleted, left):
    trial, art, logs = _trial(tmp_path)
    assert prune(trial, level, [art], logs) == deleted
    assert {str(p.relative_to(trial)) for p in trial.rglob("*") if p.is_file()} == left


def test_unknown_retention_level(tmp_path: Path):
    with pytest.raises(ValueError, match="use one of full, summary, log, none"):
        prune(tmp_path, "most", [], [])
