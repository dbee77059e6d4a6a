"""`aorta parse` and `aorta report` import only what they need: no Hydra, polars, plotly, torch,
no other collector, no report module of another tool (the real CLI, in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Never needed to parse a torchprof folder or to start a report: what made `aorta parse` of a
#: near-empty trace take 3x `import aorta_core` before (timeline's numpy report helpers,
#: diagnose, every collector's plugin module).
HEAVY = ("hydra", "polars", "plotly", "torch", "aorta_core.reports.timeline",
         "aorta_core.reports.diagnose", "aorta_ncu", "aorta_rocprof", "aorta_proton",
         "aorta_pyinstrument", "aorta_rusage")

_RUN = """
import json, os, sys
sys.argv = ['aorta', *json.loads(sys.argv[1])]
from aorta_core.app.cli import main
status = main()
os.write(2, ('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n').encode())
os.write(2, ('BLAS ' + str(os.environ.get('OPENBLAS_NUM_THREADS')) + '\\n').encode())
raise SystemExit(status)
"""


def _run(args: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, set, str]:
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(args)], capture_output=True,
                          text=True, timeout=120, env=env)
    lines = dict(line.split(" ", 1) for line in done.stderr.splitlines()
                 if line.startswith(("MODULES ", "BLAS ")))
    return done, {m.split(".")[0] for m in json.loads(lines["MODULES"])} | set(
        json.loads(lines["MODULES"])), lines["BLAS"]


def _trace(folder: Path) -> Path:
    folder.mkdir()
    (folder / "rank0.pt.trace.json").write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}}]}))
    return folder


def test_parse_torchprof_imports_no_other_tool_or_collector(tmp_path: Path) -> None:
    done, modules, blas = _run(["parse", "torchprof", str(_trace(tmp_path / "tp"))])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["torchprof_kernel_count"] == 1
    assert "aorta_torchprof.plugin" in modules  # the parse itself runs in the hook's process,
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))  # whose start-up cost
    # bench/bench_startup.py measures; here: what aorta's own process imports
    # numpy's import (45 ms; 0.3 s where bytecode is not cached) was most of this command
    assert "numpy" not in modules
    # no option given: the defaults as they are, no OmegaConf (a sweep's checks, ~80 ms)
    assert not modules & {"omegaconf", "yaml"}, sorted(modules & {"omegaconf", "yaml"})
    assert "rich" not in modules  # nothing printed on stderr: rich is not loaded
    assert blas == "1"  # the tools run numpy without OpenBLAS's thread per core


def test_parse_unknown_collector_still_names_the_installed(tmp_path: Path) -> None:
    done, _, _ = _run(["parse", "nope", str(_trace(tmp_path / "tp"))])
    assert done.returncode == 2
    assert "unknown collector 'nope'; installed: " in done.stderr and "torchprof" in done.stderr


def test_parse_options_still_checked_as_in_a_sweep(tmp_path: Path) -> None:
    done, _, _ = _run(["parse", "torchprof", str(_trace(tmp_path / "tp")), "bogus=1"])
    assert done.returncode == 2 and "bad option for torchprof: Key 'bogus' not in" in done.stderr
    done, modules, _ = _run(["parse", "torchprof", str(tmp_path / "tp"), "active=2"])
    assert done.returncode == 0 and "omegaconf" in modules


@pytest.mark.parametrize("kind", ["sweep", "overlap"])
def test_report_imports_no_hydra_torch_or_collector(tmp_path: Path, kind: str) -> None:
    args = (["report", "sweep", str(tmp_path)] if kind == "sweep" else
            ["report", "overlap", "--log-dir", str(tmp_path), "--output", str(tmp_path / "o"),
             "--no-png"])
    done, modules, _ = _run(args)
    assert done.returncode in (1, 2), done.stderr  # nothing to report: said in one line
    # (report.html shows the timeline: reports.sweep imports reports.timeline for its name)
    unwanted = {"hydra", "torch", "aorta_torchprof", *HEAVY[5 if kind == "sweep" else 4:]}
    assert not modules & unwanted, sorted(modules & unwanted)
    if kind == "sweep":  # no matrix to report: the page's modules are never loaded
        assert "aorta_core.reports.sweep" not in modules


def test_a_users_blas_threads_are_kept(tmp_path: Path) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "3"}
    done, _, blas = _run(["parse", "torchprof", str(_trace(tmp_path / "tp"))], env)
    assert done.returncode == 0 and blas == "3"
