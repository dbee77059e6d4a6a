"""End to end with the stand-in rocprofv3 selected through ROCPROF_BIN, as a user would.

The stand-in parses rocprofv3's real flag set, runs the command and writes rocprofv3's CSV
layout; these tests drive the real core CLI (``python -m aorta_core``) and the plugin hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from aorta_rocprof import plugin
from aorta_rocprof.options import RocprofOptions
from needs import need

from aorta_core import Launch

STANDIN = Path(__file__).parent / "standin" / "rocprofv3"


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def test_wrapped_launch_runs_and_parses(tmp_path):
    env = {**os.environ, "ROCPROF_BIN": str(STANDIN)}
    art = tmp_path / "rocprof"
    art.mkdir()
    opts = RocprofOptions(summary_units="usec", kernel_include_regex="gemm", pmc=["SQ_WAVES"])
    launch = plugin.wrap_argv(Launch(("/bin/echo", "hi"), env, tmp_path), opts, art)
    proc = run(list(launch.argv), env=dict(launch.env), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "hi\n"
    names = sorted(p.name for p in art.iterdir())
    assert names == ["aorta_agent_info.csv", "aorta_domain_stats.csv", "aorta_kernel_stats.csv",
                     "aorta_kernel_trace.csv", "aorta_rocprof_summary.txt"]
    assert "DURATION (usec)" in (art / "aorta_rocprof_summary.txt").read_text()
    metrics = plugin.parse_metrics(art, opts)
    assert metrics["rocprof_top_kernels"] == ["aorta_standin<echo>(char const*, int)"]
    assert metrics["rocprof_kernel_count"] == 1 and metrics["rocprof_gpu_time_ms"] > 0


def test_standin_rejects_unknown_flag_and_misread_command(tmp_path):
    unknown = run([str(STANDIN), "--kernel-trace", "--kernel-trace-all", "--", "true"])
    assert unknown.returncode == 2
    assert "unrecognized arguments: --kernel-trace-all" in unknown.stderr
    no_separator = run([str(STANDIN), "--kernel-trace", "/bin/true"])
    assert no_separator.returncode != 0 and "invalid truth value /bin/true" in no_separator.stderr


def test_exit_code_of_the_command_is_kept(tmp_path):
    proc = run([str(STANDIN), "-d", str(tmp_path), "--kernel-trace", "--output-format", "csv",
                "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert proc.returncode == 3
    assert [p.parent.parent for p in tmp_path.rglob("*_kernel_trace.csv")] == [tmp_path]


def test_sweep_through_core_cli(tmp_path):
    out = tmp_path / "sweep"
    env = {**os.environ, "ROCPROF_BIN": str(STANDIN)}
    proc = run([sys.executable, "-m", "aorta_core", "sweep=repeat", "collector=rocprof",
                "trials=2", f"output={out}", "collector.rocprof.summary_units=msec", "--",
                sys.executable, "-c", "print('x, \"y\"')"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = sorted(out.glob("cells/*/trial_*/record.json"))
    assert len(records) == 2
    record = json.loads(records[0].read_text())
    assert record["verdict"] == "pass"
    assert record["argv_run"][0] == str(STANDIN) and "-u" in record["argv_run"]
    metrics = record["metrics"]
    assert metrics["rocprof_kernel_count"] == 1
    assert Path(metrics["rocprof_artifact_dir"]).name == "rocprof"
    summary = json.loads((out / "matrix.json").read_text())["cells"][0]["metrics_summary"]
    assert summary["rocprof_kernel_count"]["n"] == 2


def test_missing_binary_is_a_setup_error_not_an_unprofiled_run(tmp_path):
    out = tmp_path / "sweep"
    env = {**os.environ, "ROCPROF_BIN": str(tmp_path / "nope")}
    marker = tmp_path / "ran"
    proc = run([sys.executable, "-m", "aorta_core", "sweep=repeat", "collector=rocprof",
                "trials=1", f"output={out}", "--", sys.executable, "-c",
                f"open({str(marker)!r}, 'w')"], env=env, cwd=tmp_path)
    record = json.loads(next(out.glob("cells/*/trial_000/record.json")).read_text())
    assert record["verdict"] == "error", proc.stderr[-2000:]
    assert "ROCPROF_BIN" in json.dumps(record["error"])
    assert not marker.exists()


def test_proton_conflict_refused_at_compose_time(tmp_path):
    need("aorta_proton")
    out = tmp_path / "sweep"
    proc = run([sys.executable, "-m", "aorta_core", "sweep=repeat", "collector=[rocprof,proton]",
                "trials=1", f"output={out}", "--", "true"],
               env={**os.environ, "ROCPROF_BIN": str(STANDIN)}, cwd=tmp_path)
    text = proc.stdout + proc.stderr + "".join(p.read_text() for p in out.rglob("cell.json"))
    assert "backend=instrumentation" in text and "put them in separate cells" in text
    assert not list(out.rglob("record.json"))
