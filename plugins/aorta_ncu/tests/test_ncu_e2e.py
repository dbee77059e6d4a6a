"""End to end with the stand-in ncu selected through NCU_BIN, as a user would.

The stand-in takes ncu's real option set, runs the command and writes a report that its
``--import --csv --page raw`` turns into ncu's raw-page CSV; these tests drive the real core CLI
(``python -m aorta_core``) and the plugin hooks. The host check is off (no NVIDIA driver here)
except where it is the subject.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aorta_ncu import plugin
from aorta_ncu.options import NcuOptions

from aorta_core import Launch, TrialRun

STANDIN = Path(__file__).parent / "standin" / "ncu"
OFFLINE = "collector.ncu.host_check=false"


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, **kw)


def sweep(tmp_path: Path, *overrides: str, command=("-c", "print('x, \"y\"')"), env=None):
    """A sweep under ncu (``collector=ncu`` unless ``overrides`` choose the collectors)."""
    out = tmp_path / "sweep"
    env = {**os.environ, "NCU_BIN": str(STANDIN), "AORTA_REPORT_PNG": "0", **(env or {})}
    chosen = [] if any(o.startswith("collector=") for o in overrides) else ["collector=ncu"]
    done = run([sys.executable, "-m", "aorta_core", "sweep=repeat", *chosen,
                f"output={out}", *overrides, "--", sys.executable, *command],
               env=env, cwd=tmp_path)
    records = [json.loads(p.read_text()) for p in sorted(out.glob("cells/*/trial_*/record.json"))]
    return done, records, out


def test_sweep_through_core_cli(tmp_path):
    done, records, out = sweep(tmp_path, "trials=2", OFFLINE, "collector.ncu.set=[SpeedOfLight]",
                               "collector.ncu.clock_control=none")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(records) == 2
    record = records[0]
    assert record["verdict"] == "pass" and record["warnings"] == {}
    argv = record["argv_run"]
    assert argv[:2] == [str(STANDIN), "--target-processes"] and "--section" in argv
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert record["collectors"]["ncu"]["artifacts"] == ["ncu/console.txt", "ncu/raw.csv",
                                                        "ncu/report.ncu-rep"]
    trial = out / "cells" / record["cell"] / "trial_000"
    header, units, row = list(csv.reader((trial / "ncu" / "raw.csv").open()))
    assert units[header.index("gpu__time_duration.sum")] == "ms"  # ncu's auto units, 6 decimals
    metrics = record["metrics"]
    name = f"standin_kernel<{Path(sys.executable).name}>"
    assert metrics["ncu_kernel_count"] == 1 and metrics["ncu_top_kernels"] == [name]
    ms = float(row[header.index("gpu__time_duration.sum")].replace(",", ""))
    assert metrics["ncu_gpu_time_ms"] == pytest.approx(ms) == metrics["ncu_top_kernel_ms"]
    for key in ("sm_throughput", "dram_throughput", "achieved_occupancy", "tensor_pipe",
                "l2_hit_rate"):
        assert metrics[f"ncu_{key}_pct"] == metrics[f"ncu_top_kernel_{key}_pct"] == 42.5
    assert "==PROF== Report:" in (trial / "ncu" / "console.txt").read_text()
    summary = json.loads((out / "matrix.json").read_text())["cells"][0]["metrics_summary"]
    assert summary["ncu_kernel_count"]["n"] == 2
    parsed = run([sys.executable, "-m", "aorta_core", "parse", "ncu", str(trial / "ncu")])
    assert json.loads(parsed.stdout) == metrics


def test_the_payloads_exit_code_is_the_trials_and_its_kernels_are_kept(tmp_path):
    _, (record,), _ = sweep(tmp_path, "trials=1", OFFLINE, command=("-c", "raise SystemExit(3)"))
    assert record["verdict"] == "fail" and record["exit_code"] == 3
    assert record["metrics"]["ncu_kernel_count"] == 1
    assert record["warnings"] == {}  # "The application returned an error code" is not news


def test_no_kernels_profiled_is_a_warning_with_the_reason(tmp_path):
    done, (record,), _ = sweep(tmp_path, "trials=1", OFFLINE, "collector.ncu.kernel_regex=gemm")
    assert done.returncode == 0, done.stderr[-2000:]
    assert record["verdict"] == "pass"
    assert "ncu_kernel_count" not in record["metrics"]
    assert record["warnings"]["ncu"] == [
        "ncu: no kernels were profiled: the command launched no CUDA kernel in a profiled "
        "process, or kernel_regex, launch_skip, launch_count or target_processes left none"]
    assert "no kernels were profiled" in done.stderr


def test_counter_permission_denied_at_run_time_is_explained(tmp_path):
    _, (record,), _ = sweep(tmp_path, "trials=1", OFFLINE,
                            env={"NCU_STANDIN_NO_PERMISSION": "1"})
    first = record["warnings"]["ncu"][0]
    assert first.startswith("ncu: ERR_NVGPUCTRPERM, no permission to read the GPU performance "
                            "counters; run as root (or with CAP_SYS_ADMIN)")
    assert "NVreg_RestrictProfilingToAdminUsers=0" in first


def test_missing_binary_is_a_setup_error_not_an_unprofiled_run(tmp_path):
    marker = tmp_path / "ran"
    _, (record,), _ = sweep(tmp_path, "trials=1", OFFLINE,
                            command=("-c", f"open({str(marker)!r}, 'w')"),
                            env={"NCU_BIN": str(tmp_path / "nope")})
    assert record["verdict"] == "error"
    assert record["error"] == (f"ncu: NCU_BIN={tmp_path / 'nope'} is not an executable file; "
                               "point NCU_BIN at ncu or unset it to use ncu from PATH")
    assert not marker.exists()


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA driver")
def test_host_check_refuses_a_machine_without_nvidia_driver(tmp_path):
    marker = tmp_path / "ran"
    _, (record,), _ = sweep(tmp_path, "trials=1", command=("-c", f"open({str(marker)!r}, 'w')"))
    assert record["verdict"] == "error"
    assert record["error"].startswith("ncu: no NVIDIA GPU driver on this machine")
    assert not marker.exists()


def test_tracing_collector_in_the_same_cell_refused_before_anything_runs(tmp_path):
    pytest.importorskip("aorta_torchprof", reason="needs the torchprof collector installed")
    done, records, _ = sweep(tmp_path, "trials=1", OFFLINE, "collector=[ncu,torchprof]")
    assert done.returncode == 1 and not records
    assert "collector ncu cannot share a trial with torchprof" in done.stderr


def test_standin_takes_ncus_options_and_answers_like_ncu(tmp_path):
    unknown = run([str(STANDIN), "--set", "basic", "--metric", "x", "--", "true"])
    assert unknown.returncode == 1
    assert "unrecognised option '--metric'" in unknown.stderr
    choice = run([str(STANDIN), "--replay-mode", "fast", "--", "true"])
    assert choice.returncode == 1 and "Invalid value 'fast' for option '--replay-mode'" in (
        choice.stderr)
    # As captured on the H200: ncu 2025.3.1 only warns about an unknown set, and keeps exit 0.
    bad_set = run([str(STANDIN), "--set", "nope", "-f", "-o", str(tmp_path / "r"), "--", "true"])
    assert bad_set.returncode == 0
    assert bad_set.stdout.splitlines()[0] == "==WARNING== No metrics to collect found in sections."
    assert bad_set.stdout.splitlines()[-1] == "==WARNING== No kernels were profiled."
    missing = run([str(STANDIN), "-o", str(tmp_path / "m"), "--", "/nonexistent/program"])
    assert missing.returncode == 1 and missing.stderr == (
        "==ERROR== '/nonexistent/program' does not exist or is not an executable. Please make "
        "sure to specify the absolute path to '/nonexistent/program' if the executable is not in "
        "the local directory.\n")


def test_an_unreadable_report_costs_the_metrics_with_the_reason(tmp_path):
    folder = tmp_path / "ncu"
    folder.mkdir()
    (folder / "report.ncu-rep").write_bytes(b"\x00not a report")
    launch = Launch(argv=("true",), env={"NCU_BIN": str(STANDIN)}, cwd=tmp_path)
    (tmp_path / "stdout.log").write_text("==PROF== Report: report.ncu-rep\npayload line\n")
    (tmp_path / "stderr.log").write_text("")
    trial = TrialRun(launch=launch, returncode=0, timed_out=False,
                     stdout_path=tmp_path / "stdout.log", stderr_path=tmp_path / "stderr.log")
    with pytest.warns(UserWarning, match=r"ncu: --import of report.ncu-rep failed \(exit 1\): "
                                         r"==ERROR== Failed to load report"):
        files = plugin.collect_artifacts(folder, NcuOptions(), trial)
    assert [f.name for f in files] == ["console.txt", "report.ncu-rep"]
    assert (folder / "console.txt").read_text() == "==PROF== Report: report.ncu-rep\n"
    with pytest.warns(UserWarning, match="ncu: no raw.csv in"):
        assert plugin.parse_metrics(folder, NcuOptions()) == {}


def test_example_recipe_makes_one_cell_per_payload(tmp_path):
    """examples/profiling/ncu: the payloads need CUDA (here their trials fail, and the sweep's exit
    status says so), so only the sweep's shape is checked."""
    repo = Path(__file__).resolve().parents[3]
    out = tmp_path / "sweep"
    done = run([sys.executable, "-m", "aorta_core", "--config-dir", "examples/profiling/ncu",
                "sweep=ncu_payloads", "collector=ncu", "trials=1", OFFLINE, f"output={out}"],
               env={**os.environ, "NCU_BIN": str(STANDIN), "AORTA_REPORT_PNG": "0"}, cwd=repo)
    records = [json.loads(p.read_text()) for p in sorted(out.glob("cells/*/trial_*/record.json"))]
    assert [r["axes"]["payload"] for r in records] == ["matmul", "triton_softmax"], done.stderr
    assert {r["verdict"] for r in records} <= {"pass", "fail"}
    for record in records:
        argv = record["argv_run"]
        assert argv[0] == str(STANDIN)
        assert argv[argv.index("--") + 1:] == [
            sys.executable, f"examples/profiling/ncu/{record['axes']['payload']}.py"]


def test_links_the_payload_leaves_are_never_written_through(tmp_path):
    """The payload knows its artifact folder: a raw.csv or console.txt it leaves as a link out of
    it is replaced by the collector's own file, and the link's target is not touched."""
    targets = {name: tmp_path / f"outside_{name}" for name in ("raw.csv", "console.txt")}
    for target in targets.values():
        target.write_text("keep me\n")
    code = ("import os; d = os.path.join(os.environ['AORTA_TRIAL_DIR'], 'ncu'); "
            + "; ".join(f"os.symlink({str(t)!r}, os.path.join(d, {n!r}))"
                        for n, t in targets.items()))
    done, records, out = sweep(tmp_path, "trials=1", OFFLINE, command=("-c", code))
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(t.read_text() == "keep me\n" for t in targets.values())
    (record,) = records
    assert record["metrics"]["ncu_kernel_count"] == 1 and record["warnings"] == {}
    folder = out / "cells" / record["cell"] / "trial_000" / "ncu"
    assert not any((folder / name).is_symlink() for name in targets)
