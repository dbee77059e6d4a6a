"""Faults a sweep and its tools meet, through the real CLI: a failure after a payload wrote never
deletes the output; Ctrl-C/SIGTERM while the matrix and reports are written; a payload's folder
thousands of levels deep; a record too big to read back; the tools on a full or read-only disk.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import GOOD_COLLECTOR, records, run_aorta

from aorta_core.api.files import remove

DEEP = """
import os, sys
os.chdir(os.path.join(os.environ["AORTA_TRIAL_DIR"], sys.argv[1]))
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
open("bottom.json", "w").write("{}")
"""


def _collector(name: str, hooks: str) -> str:
    return GOOD_COLLECTOR.format(name=name, order=50) + hooks


ITEMS_RAISE = '''
class Metrics(dict):
    def items(self):
        raise RuntimeError("items() of a hostile mapping")

@hookimpl
def parse_metrics(artifact_dir, options):
    return Metrics(x=1)
'''


def test_a_failure_after_the_payload_wrote_never_deletes_the_output(tmp_path: Path,
                                                                      plugin_site):
    """Whatever breaks once a trial started (here a hook's return value that raises when read),
    the payload's files and the output stay, and the sweep never says "nothing ran"."""
    plugin_site.add("odd", _collector("odd", ITEMS_RAISE))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "collector=odd", "--", "sh",
                      "-c", 'echo kept > "$AORTA_TRIAL_DIR/mine.txt"'], cwd=tmp_path,
                     env=plugin_site.env)
    assert "nothing ran" not in done.stderr and done.returncode != 2, done.stderr
    (mine,) = out.glob("cells/*/trial_000/mine.txt")
    assert mine.read_text() == "kept\n"


SLOW_SECTIONS = '''
import time
from pathlib import Path

@hookimpl
def report_sections(matrix, output_dir):
    (Path(output_dir) / "sections.started").touch()
    time.sleep(60)
    return []
'''


@pytest.mark.parametrize(("signum", "status", "how"), [
    (signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_a_signal_while_the_reports_are_written_is_one_line_and_the_rerun_writes_them(
        tmp_path: Path, plugin_site, signum, status, how):
    plugin_site.add("slow", _collector("slow", SLOW_SECTIONS))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=1", f"output={out}",
            "collector=slow", "hook_timeout=120", "--", "true"]
    env = {**os.environ, "AORTA_REPORT_PNG": "0", **plugin_site.env}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "sections.started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the reports never started"
        time.sleep(0.1)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"aorta: error: {how}: 1 trials recorded in ")
    (out / "sections.started").unlink()
    fast = plugin_site.root / "aorta_test_slow" / "plugin.py"
    fast.write_text(fast.read_text().replace("time.sleep(60)", "pass"))
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert "(1/1 trials already recorded)" in again.stderr
    assert (out / "report.html").is_file() and (out / "matrix.json").is_file()


def test_a_payloads_folder_thousands_of_levels_deep_costs_nothing(tmp_path: Path):
    """3,000 nested folders in a collector's artifact folder: parsed (the deep file named, not
    read), pruned by retention, removed when the trial runs again; every tool reads the trial."""
    out = tmp_path / "out"
    try:
        _a_deep_folder_in(out, tmp_path)
    finally:  # pytest's own cleanup (shutil.rmtree) recurses: a deep tree it meets fails it
        remove(out, tmp_path)


def _a_deep_folder_in(out: Path, tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text(DEEP)
    args = ["sweep=repeat", "trials=1", f"output={out}", "collector=torchprof",
            "collector.torchprof.step_on=run", "retain.on_pass=summary", "--", sys.executable,
            "deep.py", "torchprof"]
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    (trial,) = out.glob("cells/*/trial_000")
    record = json.loads((trial / "record.json").read_text())
    assert record["verdict"] == "pass"
    assert any("more than 64 levels deep" in w for w in record["warnings"]["torchprof"])
    for tool in (["parse", "torchprof", str(trial / "torchprof")], ["timeline", str(trial)],
                 ["diagnose", str(trial)], ["matrix", str(out)]):
        ran = run_aorta(tool, cwd=tmp_path)
        assert "Traceback" not in ran.stderr and "RecursionError" not in ran.stderr, tool
    (trial / "record.json").unlink()  # the trial runs again: its folders are removed first
    again = run_aorta(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((trial / "record.json").read_text())["verdict"] == "pass"


HUGE_METRIC = '''
@hookimpl
def parse_metrics(artifact_dir, options):
    return {"huge_names": ["k" * 1000] * 80_000, "huge_count": 3}
'''


def test_a_record_is_never_written_larger_than_the_matrix_reads(tmp_path: Path, plugin_site):
    """An 80 MB list metric: left out of the record with a note, so the record (and the matrix
    that reads it back) keeps everything else."""
    plugin_site.add("huge", _collector("huge", HUGE_METRIC))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "collector=huge", "--",
                      "true"], cwd=tmp_path, env=plugin_site.env)
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("cells/*/trial_000/record.json")
    assert path.stat().st_size < 64 << 20
    (record,) = records(out)
    assert "huge_names" not in record["metrics"] and record["metrics"]["huge_count"] == 3
    assert any(w.startswith("metric huge_names (") and "left out of the record" in w
               for w in record["warnings"]["huge"])
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["unreadable_records"] == [] and matrix["trials"]["pass"] == 1


@pytest.fixture
def sweep_output(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert run_aorta(["sweep=repeat", "trials=2", f"output={out}", "--", "true"],
                     cwd=tmp_path).returncode == 0
    return out


def _one_error(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("aorta: error:")]
    return line


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_the_tools_on_a_full_or_read_only_disk_say_one_line(sweep_disk, sweep_output,
                                                             tmp_path: Path, disk: str):
    small_disk = sweep_disk
    out = shutil.copytree(sweep_output, small_disk / "out")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank_0_metrics.jsonl").write_text(json.dumps(
        {"iteration": 1, "rank": 0, "timestamp": time.time(),
         "stream_times_ms": {"compute": 1.0}}) + "\n")
    if disk == "full":
        subprocess.run(["sh", "-c", f"head -c 64M /dev/zero > {small_disk / 'filler'}"],
                       check=False)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    for tool in (["matrix", str(out)],
                 ["compare", str(sweep_output), str(sweep_output), "--html",
                  str(small_disk / "page.html"), "--no-png"],
                 ["report", "overlap", "--log-dir", str(logs), "--output",
                  str(small_disk / "overlap"), "--no-png"]):
        done = run_aorta(tool, cwd=tmp_path)
        assert done.returncode == 1, (tool, done.stderr)
        line = _one_error(done)
        assert ("No space left on device" if disk == "full" else "Read-only file system") \
            in line, line
        assert "free space there" in line


def test_an_ascii_locale_runs_a_sweep_into_a_non_ascii_folder(tmp_path: Path):
    """``LC_ALL=C`` with Python's UTF-8 mode off: the folder is named as typed (UTF-8 bytes),
    the lines with non-ASCII text print, and the tools read it back."""
    import aorta_core

    installed = f"{sys.prefix} {Path(aorta_core.__file__).parent}"
    if not installed.isascii():  # Python's own limit, not aorta's: its file names are ASCII then
        pytest.skip(f"needs Python and aorta under ASCII paths ({installed}): with LC_ALL=C and "
                    "PYTHONUTF8=0 Python cannot import from a non-ASCII one")
    out = tmp_path / "sweep ü ≥"
    env = {"LC_ALL": "C", "PYTHONUTF8": "0"}
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path,
                     env=env)
    assert done.returncode == 0, done.stderr
    assert os.fsencode(str(out)) in [os.fsencode(str(p)) for p in tmp_path.iterdir()]
    assert f"wrote {out / 'matrix.json'}" in done.stderr
    assert json.loads((out / "matrix.json").read_text(encoding="utf-8"))["output"] == str(out)
    compared = run_aorta(["compare", str(out), str(out)], cwd=tmp_path, env=env)
    assert compared.returncode == 0, compared.stderr
    assert "≥" in compared.stdout


def test_a_sweep_with_stdout_closed_runs(tmp_path: Path):
    out = tmp_path / "out"
    done = subprocess.run(
        f'{shlex.quote(sys.executable)} -m aorta_core sweep=repeat trials=1 '
        f'{shlex.quote(f"output={out}")} -- true >&-', shell=True, cwd=tmp_path,
        capture_output=True, text=True, env={**os.environ, "AORTA_REPORT_PNG": "0"},
        timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and (out / "report.html").is_file()


def test_an_address_space_limit_too_small_is_one_line(tmp_path: Path):
    """``ulimit -v`` 600 MiB: polars would abort the process past it; aorta says so first."""
    done = subprocess.run(
        f'ulimit -v {600 << 10} && {shlex.quote(sys.executable)} -m aorta_core sweep=repeat '
        'trials=1 output=out -- true', shell=True, cwd=tmp_path, capture_output=True,
        text=True, env={**os.environ, "AORTA_REPORT_PNG": "0"}, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("aorta: error: the address-space limit (ulimit -v) is 600 MiB, "
                                  "below the ")
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("swap", ["trial", "cell", "collector", "files"])
def test_nothing_is_written_through_a_link_a_payload_put_in_place(tmp_path: Path, plugin_site,
                                                                   swap: str):
    """The payload swaps a folder aorta writes into next (its trial's, its cell's, its
    collector's) or the files it writes (record, timeline) for links out of the output: nothing
    is written or read through them, the trial is recorded inside the output."""
    plugin_site.add("good", _collector("good", ""))
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = {"trial": '"$AORTA_TRIAL_DIR"', "cell": '"$(dirname "$AORTA_TRIAL_DIR")"',
              "collector": '"$AORTA_TRIAL_DIR/good"'}.get(swap)
    script = (f'd={target}; mv "$d" "$d.moved"; ln -s {elsewhere} "$d"' if target else
              f'for f in record.json timeline.json stdout.log; do rm -f "$AORTA_TRIAL_DIR/$f"; '
              f'ln -s {elsewhere}/$f "$AORTA_TRIAL_DIR/$f"; done')
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "collector=good",
                      "timeline=true", "--", "sh", "-c", script], cwd=tmp_path,
                     env=plugin_site.env)
    assert "Traceback" not in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []
    trial = out / "cells" / "collector=good" / "trial_000"
    assert not trial.is_symlink() and not trial.parent.is_symlink()
    record = json.loads((trial / "record.json").read_text())
    if swap in ("trial", "cell"):
        assert record["verdict"] == "fail"
        assert record["error"].startswith("the payload replaced ") and \
            f"with a link to {elsewhere}" in record["error"]
    elif swap == "collector":
        assert any("replaced its artifact folder" in w for w in record["warnings"]["good"])
        assert (trial / "good").is_dir() and not (trial / "good").is_symlink()
    else:
        assert record["verdict"] == "pass" and not (trial / "record.json").is_symlink()
