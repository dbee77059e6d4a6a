"""The guarantees of docs/sweeps.md ("Guarantees"), each attacked through the real CLI: kill -9,
a full disk, a faulty plugin, corrupt and hostile files, racing sweeps, links in the output."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta

from aorta_core.engine.lock import SweepLock, SweepLockedError

ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": "rocprof,proton,torchprof,rusage,ncu"}


def _wait_for(folder: Path, pattern: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not list(folder.glob(pattern)):
        assert time.monotonic() < deadline, f"{folder}/{pattern} never appeared"
        time.sleep(0.05)


# -- kill -9 --------------------------------------------------------------------------------------

def test_kill_9_of_aorta_ends_the_payload_and_the_rerun_resumes(tmp_path: Path):
    out, started, late = tmp_path / "out", tmp_path / "started", tmp_path / "late"
    argv = [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=2", f"output={out}", "--",
            "sh", "-c", f'[ "$AORTA_TRIAL" = 1 ] && touch {started} && sleep 3 && touch {late}; '
                        'echo done']
    env = {**os.environ, "AORTA_REPORT_PNG": "0"}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for(tmp_path, started.name)
    proc.kill()
    proc.wait()
    time.sleep(4)
    assert not late.exists(), "the payload outlived aorta and wrote on"
    assert [r["trial"] for r in records(out)] == [0]
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert "(1/2 trials already recorded)" in again.stderr
    assert [r["trial"] for r in records(out)] == [0, 1]


# -- a full disk ----------------------------------------------------------------------------------

def test_disk_full_is_one_line_keeps_records_and_the_lock_is_released(small_disk, tmp_path):
    out = small_disk / "out"
    filler = small_disk / "filler"
    once = tmp_path / "filled-once"
    fill = (f'[ "$AORTA_TRIAL" = 1 ] && [ ! -e {once} ] && touch {once} && '
            f'head -c 8M /dev/zero > {filler}; true')
    args = ["sweep=repeat", "trials=3", f"output={out}", "--", "sh", "-c", fill]
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("aorta: error")]
    assert line.startswith(f"aorta: error: cannot write {out}/cells/default/trial_001")
    assert "(No space left on device); the records written so far are kept" in line
    assert [r["trial"] for r in records(out)] == [0]
    filler.unlink()
    rebuilt = run_aorta(["matrix", str(out)], cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr  # the lock was released, space is back
    resumed = run_aorta(args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert [r["trial"] for r in records(out)] == [0, 1, 2]


@pytest.mark.parametrize("name", ["timeline.json", "timeline.json.gz"])
def test_a_timeline_that_fills_the_disk_is_one_line_and_leaves_no_part(small_disk, tmp_path,
                                                                       name):
    """The merge streams into a temporary beside the output: when the disk fills, that
    temporary goes too (its buffered bytes, or gzip's trailer, could not be flushed)."""
    trial = tmp_path / "trial"
    shutil.copytree(Path(__file__).parents[1] / "plugins/aorta_torchprof/tests/fixtures/"
                    "cuda_h200_bench", trial)
    subprocess.run(["sh", "-c", f"head -c 2M /dev/zero > {small_disk / 'filler'}"], check=False)
    done = run_aorta(["timeline", str(trial), "--output", str(small_disk / name)], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"aorta: error: cannot write the timeline of {trial} (No space left on device); free "
        "space there (or give --output on another disk), then run it again")
    assert [p.name for p in small_disk.iterdir()] == ["filler"]


# -- a faulty plugin ------------------------------------------------------------------------------

FAULTY = '''
import dataclasses, os, sys, time
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    fault: str = "none"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="faults on demand", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def check_options(options, selected):
    if options.fault == "check_raises":
        raise RuntimeError("check bug")
    if options.fault == "check_exits":
        sys.exit(4)

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    if options.fault == "wrap_none":
        return None
    if options.fault == "wrap_exits":
        sys.exit(3)
    return launch

@hookimpl
def collect_artifacts(artifact_dir, options, run):
    if options.fault == "collect_not_list":
        return 42
    if options.fault == "collect_hangs":
        time.sleep(3600)
    return []

@hookimpl
def parse_metrics(artifact_dir, options):
    if options.fault == "parse_interrupt":
        raise KeyboardInterrupt
    if options.fault == "parse_hangs":
        time.sleep(3600)
    return {"faulty_big": 2**64, "faulty_\\ud800": 1, "faulty_ok": 1}
'''


def test_a_faulty_plugin_costs_only_its_own_metrics(plugin_site, tmp_path: Path):
    plugin_site.add("faulty", FAULTY)
    out = tmp_path / "out"
    faults = "none,wrap_none,wrap_exits,collect_not_list,collect_hangs,parse_interrupt,parse_hangs"
    started = time.monotonic()
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=faulty", "hook_timeout=2",
                      f"collector.faulty.fault={faults}", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS}, timeout=180)
    assert time.monotonic() - started < 120
    assert done.returncode == 1, done.stderr  # two setup errors; every other trial passed
    assert "Traceback" not in done.stderr
    by_fault = {r["axes"]["collector.faulty.fault"]: r for r in records(out)}
    assert len(by_fault) == 7
    ok = by_fault["none"]
    assert ok["verdict"] == "pass" and ok["metrics"]["faulty_big"] == float(2**64)
    assert "faulty_ok" in ok["metrics"] and len([m for m in ok["metrics"] if "\\" in m]) == 0
    assert any("is not valid text; dropped" in n for n in ok["warnings"]["faulty"])
    assert by_fault["wrap_none"]["error"] == "faulty: wrap_argv returned NoneType, not a Launch"
    assert by_fault["wrap_exits"]["error"] == "faulty: SystemExit: 3"
    for fault, note in [("collect_not_list", "collect_artifacts returned int, not a list"),
                        ("collect_hangs", "collect_artifacts failed: did not return within 2 s"),
                        ("parse_interrupt", "parse_metrics failed: KeyboardInterrupt"),
                        ("parse_hangs", "parse_metrics failed: did not return within 2 s")]:
        rec = by_fault[fault]
        assert rec["verdict"] == "pass", fault
        assert any(n.startswith(note) for n in rec["warnings"]["faulty"]), (fault, rec["warnings"])


def test_check_options_that_raises_or_exits_refuses_only_its_cell(plugin_site, tmp_path: Path):
    plugin_site.add("faulty", FAULTY)
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=faulty",
                      "collector.faulty.fault=check_raises,check_exits,none", f"output={out}",
                      "--", "true"], cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 1
    assert "check_options failed: RuntimeError: check bug" in done.stderr
    assert "check_options failed: SystemExit: 4" in done.stderr
    assert [r["axes"]["collector.faulty.fault"] for r in records(out)] == ["none"]
    assert (out / ".aorta.lock").read_text() == ""  # released


# -- hostile files --------------------------------------------------------------------------------

def test_fifo_and_dev_zero_files_never_hang_or_fill_memory(tmp_path: Path):
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=2", f"output={out}", "--", "true"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    trials = sorted(out.glob("cells/default/trial_*"))
    os.unlink(trials[0] / "record.json")
    os.mkfifo(trials[0] / "record.json")
    os.unlink(trials[1] / "record.json")
    os.symlink("/dev/zero", trials[1] / "record.json")
    done = run_aorta(["matrix", str(out)], cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "is not a regular file; left out" in done.stderr and "is a link; left out" in done.stderr
    fifo_payload = f'mkfifo "$AORTA_METRICS_PATH"; {shutil.which("true")}'
    again = run_aorta(["sweep=repeat", "trials=2", f"output={out}", "timeout=30", "--", "true"],
                      cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "bad record" in again.stderr and [r["trial"] for r in records(out)] == [0, 1]
    out2 = tmp_path / "out2"
    fifo = run_aorta(["sweep=repeat", "trials=1", f"output={out2}", "--", "sh", "-c",
                      fifo_payload], cwd=tmp_path, timeout=60)
    assert fifo.returncode == 0, fifo.stderr
    (rec,) = records(out2)
    metrics_file = out2 / "cells" / "default" / "trial_000" / "workload_metrics.json"
    assert rec["warnings"]["workload"] == [
        f"workload_metrics.json is unusable ({metrics_file} is not a regular file); "
        "metrics omitted"]


def _write_record(path: Path, **fields) -> None:
    base = {"schema_version": 1, "cell": "default", "trial": 0, "verdict": "pass",
            "metrics": {}, "environment": {}}
    path.write_text(json.dumps(base | fields))


def test_bad_records_are_named_left_out_and_rerun(tmp_path: Path):
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=5", f"output={out}", "--", "true"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    trials = sorted(out.glob("cells/default/trial_*"))
    _write_record(trials[0] / "record.json", metrics=[1, 2])
    _write_record(trials[1] / "record.json", trial=1, environment="gpu")
    _write_record(trials[2] / "record.json", trial=2, cell="other")
    _write_record(trials[3] / "record.json", trial=3, verdict="maybe")
    _write_record(trials[4] / "record.json", trial=0)
    matrix = run_aorta(["matrix", str(out)], cwd=tmp_path)
    assert matrix.returncode == 0
    summary = json.loads((out / "matrix.json").read_text())
    assert summary["trials"]["total"] == 0 and len(summary["unreadable_records"]) == 5
    for path, reason in zip(trials, ["at `$.metrics`", "at `$.environment`",
                                     "names cell 'other', not 'default'", "at `$.verdict`",
                                     "names trial 0, not 4"], strict=True):
        assert f"bad record {path / 'record.json'}: " in matrix.stderr
        assert reason in matrix.stderr
    again = run_aorta(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("; the trial runs again") == 5
    summary = json.loads((out / "matrix.json").read_text())
    assert summary["trials"] == {"total": 5, "pass": 5, "fail": 0, "error": 0}


def test_non_utf8_argv_runs_byte_exact_and_is_recorded(tmp_path: Path):
    out = tmp_path / "out"
    seen = tmp_path / "seen"
    arg = os.fsdecode(b"caf\xff")
    done = subprocess.run(
        [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=1", f"output={out}", "--",
         sys.executable, "-c", f"import sys, os; open({str(seen)!r}, 'wb').write(os.fsencode("
                               "sys.argv[1]))", arg],
        cwd=tmp_path, env={**os.environ, "AORTA_REPORT_PNG": "0"}, capture_output=True,
        timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert seen.read_bytes() == b"caf\xff"
    (rec,) = records(out)
    assert rec["argv"][-1] == "caf\\xff"


# -- the lock -------------------------------------------------------------------------------------

def _try_lock(folder: str) -> bool:
    lock = SweepLock(Path(folder))
    try:
        lock.acquire()
    except SweepLockedError:
        return False
    time.sleep(0.2)  # hold it while the others try
    lock.release()
    return True


def test_the_lock_is_never_held_twice(tmp_path: Path):
    for round_ in range(10):
        folder = tmp_path / f"r{round_}"
        folder.mkdir()
        if round_ % 2:
            (folder / ".aorta.lock").write_text(json.dumps({"pid": 999999, "host": "gone"}))
        with ProcessPoolExecutor(max_workers=30) as pool:
            won = sum(pool.map(_try_lock, [str(folder)] * 30))
        assert won == 1, f"round {round_}: {won} sweeps held the lock"


def test_a_lock_path_that_is_a_folder_is_refused(tmp_path: Path):
    out = tmp_path / "out"
    (out / ".aorta.lock").mkdir(parents=True)
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 2
    assert f"aorta: error: cannot lock {out}/.aorta.lock (Is a directory)" in done.stderr
    assert not (out / "cells").exists()


# -- links in the output --------------------------------------------------------------------------

def test_links_left_in_the_output_are_never_written_through(tmp_path: Path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["sweep=repeat", "trials=2", f"output={out}", "--", "sh", "-c", "echo hello"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    trial0, trial1 = sorted(out.glob("cells/default/trial_*"))
    (trial0 / "record.json").unlink()
    (trial0 / "stdout.log").unlink()
    (trial0 / "stdout.log").symlink_to(elsewhere / "victim.log")
    shutil.rmtree(trial1)
    trial1.symlink_to(elsewhere, target_is_directory=True)
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list(elsewhere.iterdir()) == []
    assert (trial0 / "stdout.log").read_text() == "hello\n"
    assert not trial1.is_symlink() and (trial1 / "record.json").is_file()


@pytest.mark.parametrize("override", [
    "hydra.sweep.subdir=../../x", "hydra.output_subdir=../../x", "hydra.job.name=../../../../x",
    "hydra.job_logging.handlers.file.filename=../x.log", "++hydra.run.dir=../x"])
def test_hydra_output_keys_cannot_lead_out_of_output(tmp_path: Path, override):
    done = run_aorta(["sweep=repeat", "trials=1", "output=out", override, "--", "true"],
                     cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"aorta: error: {override.split('=')[0]} is set by aorta "
                                        "(cells and their logs go to <output>/cells/<cell>); "
                                        "choose the folder with output=<dir>"]
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "x").exists()


def test_a_signal_to_the_sweep_is_not_swallowed_by_a_hook(plugin_site, tmp_path: Path):
    plugin_site.add("faulty", FAULTY)
    out, env = tmp_path / "out", {**os.environ, **plugin_site.env, **ONLY_TEST_PLUGINS,
                                  "AORTA_REPORT_PNG": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=3", "collector=faulty",
         "collector.faulty.fault=parse_hangs", f"output={out}", "--", "true"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(out, "cells/*/trial_000/stdout.log")
    time.sleep(1)  # inside the hanging parse_metrics
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("aorta: error: interrupted: ")
