"""The loop around one sweep, through the real CLI: an error fixed and re-run (the retry policy,
earlier attempts kept), a re-run refused because its command differs (nothing touched, the
difference named), the same command without ``output=`` resuming its run, default folders unique
per run, and a folder of the user's own never taken as an output."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_helpers import records, run_aorta


def _record(out: Path, trial: int = 0, cell: str = "default") -> dict:
    return json.loads((out / "cells" / cell / f"trial_{trial:03d}" / "record.json").read_text())


def test_an_error_fixed_runs_again_and_its_first_attempt_is_kept(tmp_path: Path):
    """A command that could not start errors (nothing measured); once it exists, the same
    command runs those trials again (retry=errored, the default) and keeps the first attempt."""
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=2", f"output={out}", "--", "./later.sh"]
    first = run_aorta(args, cwd=tmp_path)
    assert first.returncode == 1
    assert [r["verdict"] for r in records(out)] == ["error", "error"]
    script = tmp_path / "later.sh"
    script.write_text("#!/bin/sh\necho measured\n")
    script.chmod(0o755)
    again = run_aorta(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "(2 that errored run again: retry=errored)" in again.stderr
    assert "trial 1/2 (attempt 2) pass" in again.stderr
    assert ("re-ran 2 recorded trial(s) (2 that errored); each earlier attempt is kept in its "
            "trial folder, under attempts/<n>/") in again.stderr
    for trial in (0, 1):
        record = _record(out, trial)
        assert (record["verdict"], record["attempt"]) == ("pass", 2)
        kept = out / "cells" / "default" / f"trial_{trial:03d}" / "attempts" / "1"
        earlier = json.loads((kept / "record.json").read_text())
        assert (earlier["verdict"], earlier["attempt"]) == ("error", 1)
        assert "cannot start './later.sh'" in earlier["error"]
        assert (kept / "stdout.log").exists()
    trial_dir = out / "cells" / "default" / "trial_000"
    assert (trial_dir / "stdout.log").read_text() == "measured\n"
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["cells"][0]["trials"] == {"total": 2, "pass": 2, "fail": 0, "error": 0}
    third = run_aorta(args, cwd=tmp_path)  # nothing left to do: nothing runs again
    assert "(2/2 trials already recorded)" in third.stderr and "re-ran" not in third.stderr
    assert _record(out)["attempt"] == 2


def test_retry_failed_runs_failed_trials_again_and_retry_none_keeps_errors(tmp_path: Path):
    out = tmp_path / "out"
    flag = tmp_path / "fixed"
    fails = ["--", "sh", "-c", f"test -e {shlex.quote(str(flag))} || exit 3"]
    args = ["sweep=repeat", "trials=1", f"output={out}"]
    assert run_aorta([*args, *fails], cwd=tmp_path).returncode == 1
    flag.touch()
    kept = run_aorta([*args, *fails], cwd=tmp_path)  # a failure is a measurement: kept
    assert kept.returncode == 1 and ("(1/1 trials already recorded; 1 that failed is kept: "
                                     "retry=failed runs it again)") in kept.stderr
    assert _record(out)["verdict"] == "fail"
    again = run_aorta([*args, "retry=failed", *fails], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "(1 that failed runs again: retry=failed)" in again.stderr
    assert (_record(out)["verdict"], _record(out)["attempt"]) == ("pass", 2)
    assert json.loads((out / "cells/default/trial_000/attempts/1/record.json").read_text()
                      )["exit_code"] == 3

    errored = tmp_path / "errored"
    missing = ["sweep=repeat", "trials=1", f"output={errored}", "retry=none", "--", "./nope"]
    assert run_aorta(missing, cwd=tmp_path).returncode == 1
    (tmp_path / "nope").write_text("#!/bin/sh\n")
    (tmp_path / "nope").chmod(0o755)
    none = run_aorta(missing, cwd=tmp_path)
    assert none.returncode == 1 and ("(1/1 trials already recorded; 1 that errored is kept: "
                                     "retry=errored runs it again)") in none.stderr
    assert _record(errored)["verdict"] == "error"
    bad = run_aorta(["sweep=repeat", "retry=some", "--", "true"], cwd=tmp_path)
    assert bad.returncode == 2 and "retry" in bad.stderr and "Traceback" not in bad.stderr


def test_a_bad_record_is_kept_as_an_attempt_when_its_trial_runs_again(tmp_path: Path):
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=1", f"output={out}", "--", "true"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    path = out / "cells" / "default" / "trial_000" / "record.json"
    path.write_text('{"schema_version": 1, "verd')
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(1 with an unusable record runs again)" in done.stderr
    assert (path.parent / "attempts" / "1" / "record.json").read_text() == (
        '{"schema_version": 1, "verd')


def _outputs(out: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(out)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".aorta.lock"}


def test_a_refused_rerun_changes_nothing_and_names_what_differs(tmp_path: Path):
    out = tmp_path / "out"
    given = ["sweep=repeat", "trials=1", f"output={out}"]
    assert run_aorta([*given, "--", "sh", "-c", "echo a"], cwd=tmp_path).returncode == 0
    before = _outputs(out)
    refused = run_aorta([*given, "--", "sh", "-c", "echo b"], cwd=tmp_path)
    assert refused.returncode == 2
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("aorta: error:")]
    assert line == (f"aorta: error: cell default: {out / 'cells' / 'default'} holds trials of "
                    "another run (command argument 2: 'echo a' then, 'echo b' now); nothing was "
                    "changed: choose a new output=<dir>, or delete that cell folder to measure "
                    "the cell again")
    assert _outputs(out) == before  # cell.json, records, matrix, perf.md, report.html: as they were
    cell = json.loads((out / "cells" / "default" / "cell.json").read_text())
    assert cell["error"] is None


def test_the_refusal_names_a_changed_variable(tmp_path: Path):
    """The cell's name is its overrides' text; the value of ``${oc.env:...}`` is not in it."""
    out = tmp_path / "out"
    given = ["sweep=repeat", "trials=1", f"output={out}", "+env.FOO=${oc.env:MY_FOO}", "--",
             "true"]
    assert run_aorta(given, cwd=tmp_path, env={"MY_FOO": "1"}).returncode == 0
    done = run_aorta(given, cwd=tmp_path, env={"MY_FOO": "2"})
    assert done.returncode == 2, done.stderr
    assert "holds trials of another run (env.FOO: '1' then, '2' now); nothing was changed" \
        in done.stderr


def _sweep(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "aorta_core", *args], cwd=cwd,
                            env={**os.environ, "AORTA_REPORT_PNG": "0"}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_same_command_without_output_resumes_its_interrupted_run(tmp_path: Path):
    args = ["sweep=repeat", "trials=3", "--", "sh", "-c", "sleep 1"]
    proc = _sweep(args, tmp_path)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("aorta_runs/*/cells/*/trial_000/record.json")):
        assert time.monotonic() < deadline, "no trial was recorded"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    (run,) = (tmp_path / "aorta_runs").iterdir()
    kept = len(records(run))
    assert err.strip().splitlines()[-1] == (
        f"aorta: error: terminated (SIGTERM): {kept} trials recorded in {run}; run the same "
        f"command again to resume (from another folder: add {shlex.quote(f'output={run}')})")
    other = run_aorta(["sweep=repeat", "trials=3", "--", "true"], cwd=tmp_path)
    assert other.returncode == 0 and "resuming" not in other.stderr  # another command
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (f"resuming {run}, the latest run of this command, which has trials left to run "
            f"({kept} recorded); give output=<dir> for a new run") in done.stderr
    assert f"({kept}/3 trials already recorded)" in done.stderr
    assert len(records(run)) == 3
    fresh = run_aorta(args, cwd=tmp_path)  # finished and passed: a new run
    assert fresh.returncode == 0 and "resuming" not in fresh.stderr
    assert len(list((tmp_path / "aorta_runs").iterdir())) == 3


def test_the_same_command_resumes_a_run_with_errored_trials_once_fixed(tmp_path: Path):
    args = ["sweep=repeat", "trials=1", "--", "./later.sh"]
    assert run_aorta(args, cwd=tmp_path).returncode == 1
    (run,) = (tmp_path / "aorta_runs").iterdir()
    (tmp_path / "later.sh").write_text("#!/bin/sh\n")
    (tmp_path / "later.sh").chmod(0o755)
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"resuming {run}" in done.stderr
    assert [p.name for p in (tmp_path / "aorta_runs").iterdir()] == [run.name]
    assert _record(run)["attempt"] == 2


def test_sweeps_started_in_the_same_second_get_folders_of_their_own(tmp_path: Path):
    args = ["sweep=repeat", "trials=1", "--", "true"]
    procs = [_sweep(args, tmp_path) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    runs = sorted((tmp_path / "aorta_runs").iterdir())
    assert len(runs) == 3
    assert all(len(records(run)) == 1 for run in runs)


def test_a_folder_of_the_users_own_is_refused_as_output(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "perf.md").write_text("my notes\n")
    (project / "train.py").write_text("print('hi')\n")
    done = run_aorta(["sweep=repeat", "trials=1", "output=.", "--", "true"], cwd=project)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"aorta: error: output={project} holds files aorta did not write (perf.md, train.py); "
        "a sweep writes cells/, matrix.json, perf.md and report.html there: choose a new or "
        "empty output=<dir>")
    assert sorted(p.name for p in project.iterdir()) == ["perf.md", "train.py"]
    assert (project / "perf.md").read_text() == "my notes\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_aorta(["sweep=repeat", "trials=1", f"output={empty}", "--", "true"],
                     cwd=tmp_path).returncode == 0


PROFILED = """
import os, sys, torch
x = torch.randn(64, 64)
for _ in range(3):
    x = x @ x / 64
sys.exit(0 if os.path.exists(sys.argv[1]) else 3)
"""


def test_the_timeline_of_a_retried_trial_reads_its_last_attempt_only(tmp_path: Path):
    """An earlier attempt's traces, kept under attempts/, are neither merged into the trial's
    timeline nor named as another trial inside it."""
    out, flag = tmp_path / "out", tmp_path / "fixed"
    (tmp_path / "payload.py").write_text(PROFILED)
    args = ["sweep=repeat", "trials=1", f"output={out}", "collector=torchprof",
            "collector.torchprof.step_on=run", "retry=failed",
            "--", sys.executable, "payload.py", str(flag)]
    assert run_aorta(args, cwd=tmp_path).returncode == 1
    flag.touch()
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    (trial,) = out.glob("cells/*/trial_000")
    assert list((trial / "attempts" / "1" / "torchprof").rglob("*.json*"))
    done = run_aorta(["timeline", str(trial)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "inside it" not in done.stderr and "warning" not in done.stderr
    merged = json.loads((trial / "timeline.json").read_text())
    os.rename(trial / "attempts", tmp_path / "attempts")  # the trial without its history
    assert run_aorta(["timeline", str(trial)], cwd=tmp_path).returncode == 0
    alone = json.loads((trial / "timeline.json").read_text())
    assert len(merged["traceEvents"]) == len(alone["traceEvents"])
