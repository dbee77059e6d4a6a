"""End-to-end: the real CLI runs sweeps in temporary folders."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from cli_helpers import records, run_aorta

ECHO_ARGV = (
    "import json, os, sys; "
    "open(os.path.join(os.environ['AORTA_TRIAL_DIR'], 'argv.json'), 'w', encoding='utf-8')"
    ".write(json.dumps(sys.argv[1:]))"
)

WEIRD_ARGS = [
    "two words", "it's", 'say "hi"', "a=b", "x,y,z", "$(rm -rf /)", "; echo pwned", "`id`",
    "ünïcødé ✓ 日本", "${oc.env:HOME}", "\\${escaped}", "\\\\${x}", "back\\slash", "", "--", "-m",
    "key=[1,2]", "*", "~", "'", "\\",
]


def test_argv_after_double_dash_reaches_the_workload_byte_exact(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(
        ["sweep=repeat", "trials=1", f"output={out}", "--", sys.executable, "-c", ECHO_ARGV,
         *WEIRD_ARGS],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (trial,) = records(out)
    assert trial["verdict"] == "pass"
    seen = json.loads((out / "cells" / trial["cell"] / "trial_000" / "argv.json").read_text())
    assert seen == WEIRD_ARGS
    assert trial["argv"] == [sys.executable, "-c", ECHO_ARGV, *WEIRD_ARGS]


def test_repeat_runs_trials_and_writes_matrix(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=3", f"output={out}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    recs = records(out)
    assert [r["trial"] for r in recs] == [0, 1, 2]
    for rec in recs:
        assert rec["schema_version"] == 1
        assert rec["verdict"] == "pass" and rec["exit_code"] == 0 and rec["timed_out"] is False
        assert rec["wall_time_s"] > 0
        assert rec["environment"]["host"] and rec["environment"]["python"]
    matrix = json.loads((out / "matrix.json").read_text())
    (cell,) = matrix["cells"]
    assert cell["trials"] == {"total": 3, "pass": 3, "fail": 0, "error": 0}
    assert cell["wall_time_s"]["n"] == 3
    assert (out / "matrix.parquet").stat().st_size > 0
    assert "| metric " in (out / "perf.md").read_text()  # one cell: a column of its own
    assert "wrote" in done.stderr and "matrix.json" in done.stderr


def test_default_output_is_a_new_timestamped_folder(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "trials=1", "--", "true"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "aorta_runs").iterdir()
    assert (run_dir / "matrix.json").exists()


def test_relative_output_lands_under_the_working_folder(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "trials=1", "output=rel/x", "--", "true"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rel" / "x" / "matrix.json").exists()


def test_failing_and_missing_commands_get_verdicts_and_the_sweep_goes_on(tmp_path: Path):
    out = tmp_path / "out"
    script = "import sys; print('boom', file=sys.stderr); sys.exit(3)"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", sys.executable, "-c",
                      script], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (rec,) = records(out)
    assert rec["verdict"] == "fail" and rec["exit_code"] == 3
    assert rec["error"] == "exit code 3: boom"

    out2 = tmp_path / "out2"
    done = run_aorta(["sweep=repeat", "trials=2", f"output={out2}", "--", "no-such-program-x"],
                     cwd=tmp_path)
    recs = records(out2)
    assert [r["verdict"] for r in recs] == ["error", "error"]
    assert recs[0]["error"] == "cannot start 'no-such-program-x': No such file or directory"


def test_timeout_ends_the_whole_process_group(tmp_path: Path):
    out = tmp_path / "out"
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    done = run_aorta(["sweep=repeat", "trials=1", "timeout=1", f"output={out}", "--",
                      sys.executable, "-c", script], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (rec,) = records(out)
    assert rec["verdict"] == "fail" and rec["timed_out"] is True and rec["exit_code"] is None
    assert "timed out after 1 s" in rec["error"]
    child = int(pidfile.read_text())
    try:
        os.kill(child, 0)
        alive = Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the payload's child outlived the timeout"


def test_resume_runs_only_missing_or_unreadable_trials(tmp_path: Path):
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=3", f"output={out}", "--", "true"]
    assert run_aorta(args, cwd=tmp_path).returncode == 0
    before = {r["trial"]: r["recorded_at_unix"] for r in records(out)}
    cell_dir = next((out / "cells").iterdir())
    (cell_dir / "trial_001" / "record.json").unlink()
    (cell_dir / "trial_002" / "record.json").write_text('{"schema_version": 1, "verd')
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    after = {r["trial"]: r["recorded_at_unix"] for r in records(out)}
    assert after[0] == before[0]
    assert after[1] != before[1] and after[2] != before[2]
    assert "1/3 trials already recorded" in done.stderr


def test_resume_refuses_a_different_command_in_the_same_output(tmp_path: Path):
    out = tmp_path / "out"
    assert run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"],
                     cwd=tmp_path).returncode == 0
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "false"], cwd=tmp_path)
    assert done.returncode == 2
    assert "holds trials of another run (command argument 0: 'true' then, 'false' now)" \
        in done.stderr
    assert [r["argv"] for r in records(out)] == [["true"]]


def test_lock_stops_a_second_sweep_and_a_dead_holder_is_taken_over(tmp_path: Path):
    import socket
    import subprocess

    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".aorta.lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, json, os, socket, sys, time; "
        f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT); fcntl.lockf(fd, fcntl.LOCK_EX); "
        "os.write(fd, json.dumps({'pid': os.getpid(), 'host': socket.gethostname()}).encode()); "
        "print('locked', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path)
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert line == (f"aorta: error: another sweep (pid {holder.pid} on {socket.gethostname()})"
                        f" is writing to {out}; wait for it or choose another output=<dir>")
        assert not (out / "cells").exists()
    finally:
        holder.kill()
        holder.wait()
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [ln for ln in done.stderr.splitlines() if ln.startswith("aorta: warning")]
    assert warnings == [f"aorta: warning: taking over the lock of a sweep that ended without "
                        f"releasing it (pid {holder.pid} on {socket.gethostname()})"]
    assert lock.read_text() == ""  # released: emptied, never removed


def test_unwritable_output_is_one_clear_line(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run_aorta(["sweep=repeat", f"output={blocker}/sub", "--", "true"], cwd=tmp_path)
    assert done.returncode == 2
    assert f"aorta: error: cannot write to output={blocker}/sub" in done.stderr
    assert "choose a writable output=<dir>" in done.stderr


def test_unknown_recipe_is_one_line_naming_the_available_ones(tmp_path: Path):
    done = run_aorta(["sweep=nope", "--", "true"], cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("aorta: error: In 'config': Could not find 'sweep/nope'")
    assert "Available options in 'sweep': agree, default, grid, repeat" in line
    assert not (tmp_path / "aorta_runs").exists()


def test_missing_command_is_reported_and_nothing_runs(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "command=null", f"output={out}"], cwd=tmp_path)
    assert done.returncode == 1
    assert "no command to run: put one after `--`" in done.stderr
    assert records(out) == []
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["cells"][0]["error"].startswith("no command to run")


def test_grid_recipe_sweeps_two_axes_of_the_default_workload(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=grid", "trials=1", "workload.steps=2", f"output={out}"],
                     cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert "workload.batch_size" in matrix["axes"] and "workload.hidden" in matrix["axes"]
    combos = {(c["axes"]["workload.batch_size"], c["axes"]["workload.hidden"])
              for c in matrix["cells"]}
    assert combos == {("16", "64"), ("16", "256"), ("64", "64"), ("64", "256")}
    for cell in matrix["cells"]:
        assert cell["trials"]["pass"] == 1, cell
        assert cell["metrics_summary"]["workload_samples_per_s"]["n"] == 1
    perf = (out / "perf.md").read_text()
    assert "workload_loss_final" in perf


def test_cell_env_and_trial_variables_reach_the_workload(tmp_path: Path):
    out = tmp_path / "out"
    script = ("import json, os; json.dump({'x': os.environ['MY_FLAG'], "
              "'cell': os.environ['AORTA_CELL']},"
              " open(os.environ['AORTA_METRICS_PATH'], 'w'))")
    done = run_aorta(["sweep=repeat", "trials=1", "+env.MY_FLAG=on", f"output={out}", "--",
                      sys.executable, "-c", script], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (rec,) = records(out)
    assert rec["metrics"]["workload_x"] == "on"
    assert rec["metrics"]["workload_cell"] == rec["cell"]
    assert rec["cell_env"] == {"MY_FLAG": "on"}


def test_matrix_command_rebuilds_and_reports_unreadable_records(tmp_path: Path):
    out = tmp_path / "out"
    assert run_aorta(["sweep=repeat", "trials=2", f"output={out}", "--", "true"],
                     cwd=tmp_path).returncode == 0
    (out / "matrix.json").unlink()
    bad = next(out.glob("cells/*/trial_001/record.json"))
    bad.write_text("{")
    done = run_aorta(["matrix", str(out)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["cells"][0]["trials"]["total"] == 1
    assert matrix["unreadable_records"] == [str(bad.relative_to(out))]
    assert f"aorta: warning: bad record {bad}: Input data was truncated; left out" in done.stderr

    done = run_aorta(["matrix", str(tmp_path)], cwd=tmp_path)
    assert done.returncode == 2 and "holds no sweep" in done.stderr


def test_help_answers_and_lists_recipes(tmp_path: Path):
    done = run_aorta(["--help"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sweep: agree, default, grid, repeat" in done.stdout
    assert "workload: benchmark, tiny" in done.stdout
    assert "== Config ==" in done.stdout and "trials: 3" in done.stdout  # config.yaml as written
    composed = run_aorta(["--help", "sweep=grid"], cwd=tmp_path)
    assert composed.returncode == 0, composed.stderr
    assert "trials: 2" in composed.stdout and "workload.hidden" in composed.stdout


def test_the_default_sweep_runs_the_benchmark_with_no_arguments(tmp_path: Path):
    """Any machine: each cell runs as many ranks as ``auto`` chose for it (2 gloo ranks on a
    CPU-only machine, one rank per visible GPU on a GPU host)."""
    done = run_aorta(["trials=1", "workload.steps=3"], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "aorta_runs").iterdir()
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert sorted(c["axes"]["workload.parallel"] for c in matrix["cells"]) == ["ddp", "fsdp"]
    for cell in matrix["cells"]:
        assert cell["trials"]["pass"] == 1, cell
        assert cell["metrics_summary"]["workload_step_time_ms"]["median"] > 0
        ranks = cell["auto"]["chosen"]["workload.nproc"]
        assert cell["metrics_summary"]["workload_world_size"]["median"] == ranks


def test_a_recipe_of_your_own_with_command_line_axes_winning(tmp_path: Path):
    repo = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    done = run_aorta(["--config-dir", "examples/sweeps", "sweep=matmul", "trials=1", "size=64",
                      "threads=1,2", f"output={out}"], cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    assert sorted((c["axes"]["size"], c["axes"]["threads"]) for c in matrix["cells"]) == [
        ("64", "1"), ("64", "2")]
    recs = records(out)
    assert {r["cell_env"]["OMP_NUM_THREADS"] for r in recs} == {"1", "2"}
    assert all(r["argv"][-1] == "--size=64" and r["metrics"]["workload_gflops"] > 0 for r in recs)


def test_an_argument_of_your_own_script_is_swept_from_the_command_line(tmp_path: Path):
    """docs/sweeps.md "Sweeping an argument of your own script": the cells are named by the
    swept key, the command runs in this Python (``${aorta_python:}``) with the value in place."""
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "-m", "+size=64,128",
                      "command=[${aorta_python:},-c,'import sys; print(sys.argv[1:])',"
                      "'--size=${size}']"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (out / "cells").iterdir()) == ["size=128", "size=64"]
    for size in (64, 128):
        (record,) = [r for r in records(out) if r["cell"] == f"size={size}"]
        assert record["argv"][0] == sys.executable
        assert record["argv"][-1] == f"--size={size}"
    swept = run_aorta(["sweep=repeat", "trials=1", f"output={tmp_path / 'two'}", "-m",
                       "command=[echo,a],[echo,b]"], cwd=tmp_path)  # a swept command names
    assert swept.returncode == 0, swept.stderr  # its cells
    names = sorted(p.name for p in (tmp_path / "two" / "cells").iterdir())
    assert len(names) == 2 and all(n.startswith("command=") for n in names), names


def test_parse_of_a_sweep_cell_or_trial_folder_names_the_artifact_folder_to_pass(tmp_path: Path):
    """Read as one artifact folder, a sweep's output would add every trial's traces (and the
    timelines written beside them) into one set of metrics."""
    out = tmp_path / "runs a"
    (tmp_path / "train.py").write_text("import torch\ntorch.ones(4).sum()\n")
    swept = run_aorta(["sweep=repeat", "trials=1", "collector=torchprof", f"output={out}", "--",
                       sys.executable, "train.py"], cwd=tmp_path)
    assert swept.returncode == 0, swept.stderr[-2000:]
    [trial] = sorted(out.glob("cells/*/trial_000"))
    for folder, said in ((out, f"{out} is a sweep's output folder"),
                         (trial.parent, f"{trial.parent} is a cell's folder"),
                         (trial, f"{trial} is a trial's folder")):
        done = run_aorta(["parse", "torchprof", str(folder)], cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"aorta: error: {said}, not torchprof's artifact folder"), line
    assert f"aorta parse {shlex.quote(str(out))} --kernels" in run_aorta(
        ["parse", "torchprof", str(out)], cwd=tmp_path).stderr
    parsed = run_aorta(["parse", "torchprof", str(trial / "torchprof")], cwd=tmp_path)
    assert parsed.returncode == 0 and json.loads(parsed.stdout)["torchprof_trace_count"] == 1
