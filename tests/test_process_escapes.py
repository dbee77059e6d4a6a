"""Processes that escape a trial, attacked through the real CLI: a daemon a collector hook forks
(it must keep neither the sweep lock nor the watchdog's pipe), a payload child that leaves the
trial's process group with ``setsid()`` (it must end with its trial, also after ``kill -9`` of
aorta), a payload that ignores SIGTERM (its wall time ends at the timeout, not after the grace),
and a watchdog that cannot start (named as such, not as the payload).

CPU only: the payloads are small Python and shell programs. Linux: escaped processes are found
through ``/proc``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta
from needs import needs

from aorta_core.engine.lock import SweepLock, SweepLockedError
from aorta_core.engine.process import TERMINATE_GRACE_S
from aorta_core.engine.reaper import TOKEN_ENV

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="escapes are found via /proc")

ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": "rocprof,proton,torchprof,rusage,ncu"}

#: A collector whose ``parse_metrics`` forks a daemon the way a naive helper does: ``fork``, a
#: new session, stdio to /dev/null, every other descriptor kept; its pid is appended to
#: ``$FORKER_PIDS``.
FORKER = '''
import os, time
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    pass

@hookimpl
def aorta_collector():
    return CollectorInfo(description="forks a daemon", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        time.sleep(60)
        os._exit(0)
    with open(os.environ["FORKER_PIDS"], "a") as fh:
        fh.write(f"{pid}\\n")
    return {}
'''


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _carrying(token: str, variable: str = TOKEN_ENV) -> list[int]:
    """The processes whose environment still holds ``token`` (in ``variable``)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            if any(e.startswith(f"{variable}=".encode()) and token.encode() in e
                   for e in environ):
                found.append(int(name))
    return found


@contextlib.contextmanager
def _ends_pids_in(path: Path):
    """End the processes whose pids the test's payloads or plugins wrote to ``path``: a file, or
    a folder of files (the first word of each line)."""
    try:
        yield path
    finally:
        files = sorted(path.iterdir()) if path.is_dir() else [path] if path.exists() else []
        for line in (line for f in files for line in f.read_text().splitlines()):
            with contextlib.suppress(OSError):
                os.kill(int(line.split()[0]), signal.SIGKILL)


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _sweep(out: Path, *payload: str, trials: int = 1, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "aorta_core", *extra, "sweep=repeat", f"trials={trials}",
            f"output={out}", "--", *payload]


# -- a daemon forked by a collector hook -----------------------------------------------------------

def test_a_daemon_forked_by_a_hook_does_not_keep_the_sweep_locked(plugin_site, tmp_path: Path):
    plugin_site.add("forker", FORKER)
    out = tmp_path / "out"
    with _ends_pids_in(tmp_path / "daemons") as daemons:
        env = {**plugin_site.env, **ONLY_TEST_PLUGINS, "FORKER_PIDS": str(daemons)}
        args = ["sweep=repeat", "collector=forker", f"output={out}", "--", "true"]
        first = run_aorta(["trials=1", *args], cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        (daemon,) = map(int, daemons.read_text().split())
        assert _alive(daemon)  # it outlived aorta, as it meant to
        again = run_aorta(["trials=2", *args], cwd=tmp_path, env=env)
        assert again.returncode == 0, again.stderr
        assert "another sweep" not in again.stderr
        assert [r["trial"] for r in records(out)] == [0, 1]


def test_kill_9_of_aorta_ends_the_trial_though_a_hook_daemon_holds_the_watchdog_pipe(
        plugin_site, tmp_path: Path):
    plugin_site.add("forker", FORKER)
    out, started, late = tmp_path / "out", tmp_path / "started", tmp_path / "late"
    with _ends_pids_in(tmp_path / "daemons") as daemons:
        env = {**os.environ, **plugin_site.env, **ONLY_TEST_PLUGINS, "AORTA_REPORT_PNG": "0",
               "FORKER_PIDS": str(daemons)}
        script = f'[ "$AORTA_TRIAL" = 1 ] && touch {started} && sleep 3 && touch {late}; true'
        proc = subprocess.Popen(_sweep(out, "sh", "-c", script, trials=2,
                                       extra=("collector=forker",)),
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _wait_for(started)
        assert _alive(int(daemons.read_text().split()[0]))  # forked after the watchdog started
        proc.kill()
        proc.wait()
        time.sleep(4)
        assert not late.exists(), "the payload outlived aorta: its watchdog never saw it die"


def test_a_second_lock_in_one_process_is_refused_and_the_first_is_kept(tmp_path: Path):
    """Record locks never conflict within one process, and closing any descriptor of the file
    drops them: a second lock here must be refused without losing the first."""
    out = tmp_path / "out"
    out.mkdir()
    first = SweepLock(out)
    first.acquire()
    try:
        with pytest.raises(SweepLockedError, match=rf"another sweep \(pid {os.getpid()} on "):
            SweepLock(out).acquire()
        args = ["sweep=repeat", "trials=1", f"output={out}", "--", "true"]
        held = run_aorta(args, cwd=tmp_path)
        assert held.returncode == 2 and f"another sweep (pid {os.getpid()} on " in held.stderr
    finally:
        first.release()
    assert run_aorta(args, cwd=tmp_path).returncode == 0


# -- a payload child that leaves the trial's process group -----------------------------------------

#: Starts a child in a new session that writes "<pid> <token>" to ``<argv[1]>/<cell>.<trial>``,
#: then a line to the trial's stdout every 50 ms for 8 s (argv[2] == "log") or touches argv[3]
#: after 3 s ("late"); the leader returns once the child has started (or sleeps, "late").
ESCAPER = textwrap.dedent('''
    import os, subprocess, sys, time
    folder, mode = sys.argv[1], sys.argv[2]
    stamp = os.path.join(folder, os.environ["AORTA_CELL"] + "." + os.environ["AORTA_TRIAL"])
    child = """
    import os, sys, time
    token = os.environ.get("AORTA_TRIAL_TOKEN", "-")
    open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {token}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    if sys.argv[2] == "log":
        for i in range(160):
            print("still here", i, flush=True)
            time.sleep(0.05)
    else:
        time.sleep(3)
        open(sys.argv[3], "w").close()
    """
    subprocess.Popen([sys.executable, "-c", child, stamp, *sys.argv[2:]], start_new_session=True)
    while not os.path.exists(stamp):
        time.sleep(0.01)
    print("leader done", flush=True)
    if mode != "log":
        time.sleep(60)
''')


@pytest.mark.parametrize("launcher", [
    pytest.param((), id="in-process"),
    pytest.param(("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "+cell=a,b"),
                 id="two-joblib-workers", marks=needs("hydra_plugins.hydra_joblib_launcher")),
])
def test_a_child_that_leaves_the_group_ends_with_its_trial(tmp_path: Path, launcher):
    out, escapers = tmp_path / "out", tmp_path / "escapers"
    escapers.mkdir()
    with _ends_pids_in(escapers):
        done = subprocess.run(_sweep(out, sys.executable, "-c", ESCAPER, str(escapers), "log",
                                     trials=2, extra=launcher),
                              cwd=tmp_path, env={**os.environ, "AORTA_REPORT_PNG": "0"},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        logs = sorted(out.glob("cells/*/trial_*/stdout.log"))
        assert len(logs) == len(list(escapers.iterdir())) == 2 * (1 + bool(launcher))
        sizes = [log.stat().st_size for log in logs]
        time.sleep(1.5)
        assert [log.stat().st_size for log in logs] == sizes, "an escaped child still writes"
        for stamp in escapers.iterdir():
            pid, token = stamp.read_text().split()
            assert not _alive(int(pid)) and _carrying(token) == []


def test_kill_9_of_aorta_ends_a_child_that_left_the_group(tmp_path: Path):
    out, late, escapers = tmp_path / "out", tmp_path / "late", tmp_path / "escapers"
    escapers.mkdir()
    with _ends_pids_in(escapers):
        proc = subprocess.Popen(
            _sweep(out, sys.executable, "-c", ESCAPER, str(escapers), "late", str(late)),
            cwd=tmp_path, env={**os.environ, "AORTA_REPORT_PNG": "0"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stamp = escapers / "default.0"
        _wait_for(stamp)
        proc.kill()
        proc.wait()
        time.sleep(4)
        assert not late.exists(), "the child that left the group outlived aorta"
        assert _carrying(stamp.read_text().split()[1]) == []


# -- the wall time of a timed-out trial ------------------------------------------------------------

def test_a_timed_out_trial_is_timed_to_its_timeout_not_the_grace(tmp_path: Path):
    out = tmp_path / "out"
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    done = run_aorta(["sweep=repeat", "trials=1", "timeout=1", f"output={out}", "--",
                      sys.executable, "-c", stubborn], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (rec,) = records(out)
    assert rec["timed_out"] and rec["error"] == "timed out after 1 s; process group ended"
    assert 1 <= rec["wall_time_s"] < TERMINATE_GRACE_S, rec["wall_time_s"]


# -- a watchdog that cannot start ------------------------------------------------------------------

def _ghost_args(out: Path) -> list[str]:
    """Arguments of a Python that runs a one-trial sweep when started under an ``argv[0]`` that is
    no path (as some launchers do): Python then does not know its interpreter (``sys.executable``
    is empty). Nor does it find the virtualenv it belongs to (nox's, a user's): its path is this
    Python's folders, with their ``.pth`` files (an editable install), in this Python's order, so
    that the base interpreter's own site-packages (a pyenv's, with other versions of aorta's
    dependencies) cannot shadow the venv's. Skips where this Python finds its interpreter anyway."""
    start = ("import runpy, site, sys\nsys.path[:] = []\n"
             f"for folder in {[p for p in sys.path if p]!r}:\n    site.addsitedir(folder)\n")
    probe = subprocess.run(["ghost", "-c", start + "import sys, aorta_core; print(sys.executable)"],
                           executable=sys.executable, capture_output=True, text=True, check=True)
    if probe.stdout.strip():
        pytest.skip(f"this Python finds its interpreter anyway ({probe.stdout.strip()})")
    aorta = start + "runpy.run_module('aorta_core', run_name='__main__', alter_sys=True)"
    return ["-c", aorta, *_sweep(out, "true")[3:]]


def _run(argv: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env={**os.environ, "AORTA_REPORT_PNG": "0"},
                          capture_output=True, text=True, timeout=120, **kwargs)


def test_the_watchdog_starts_though_python_does_not_know_its_own_path(tmp_path: Path):
    """With ``sys.executable`` empty (or a path this user cannot reach again: a Python in a
    private home started with capabilities the process lost) the watchdog is started from the
    running binary, and the trial runs."""
    done = _run(["ghost", *_ghost_args(tmp_path / "out")], tmp_path, executable=sys.executable)
    assert done.returncode == 0, done.stderr
    (rec,) = records(tmp_path / "out")
    assert rec["verdict"] == "pass", rec


def test_a_watchdog_that_cannot_start_is_named_not_the_payload(tmp_path: Path):
    """No path to this Python and no ``/proc`` (unmounted in a private mount namespace): the
    watchdog cannot be started, the trial is not run, and the error names the watchdog."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("bash"):
        pytest.skip("needs root, unshare(1) and bash to run aorta without /proc")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("unshare -m is not allowed here")
    no_proc = ["unshare", "-m", "bash", "-c", 'umount -l /proc && exec -a ghost "$0" "$@"']
    done = _run([*no_proc, sys.executable, *_ghost_args(tmp_path / "out")], tmp_path)
    assert done.returncode == 1, done.stderr
    (rec,) = records(tmp_path / "out")
    assert rec["verdict"] == "error" and rec["exit_code"] is None
    assert rec["error"] == (
        "cannot start aorta's watchdog (sys.executable is empty: run aorta by the path of its "
        "python or its script; /proc/self/exe: No such file or directory); the trial was not "
        "run, as nothing would end it if aorta were killed")
    assert "Traceback" not in done.stderr and "cannot start 'true'" not in done.stderr
