"""`aorta parse torchprof` over several real rank traces: the worker pool gives the sequential
result, and the tool's calls share one pool (aorta_core.api.parallel.shared_workers)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import run_aorta
from test_slurm_signals import _descendants

from aorta_core.api.parallel import WORKERS_ENV, shared_workers

FIXTURES = Path(__file__).parent.parent / "plugins" / "aorta_torchprof" / "tests" / "fixtures"
TRACES = ["cpu_gloo_2rank/rank0.step4.pt.trace.json.gz",
          "cpu_gloo_2rank/rank1.step4.pt.trace.json.gz",
          "cuda_h200/torchprof/rank0.step5.pt.trace.json",
          "cuda_h200_bench/torchprof/rank0/rank0_step4.pt.trace.json.gz",
          "cpu_single/rank0.step5.pt.trace.json"]


def _capture(folder: Path) -> Path:
    for i, name in enumerate(TRACES):  # one folder per trace, as each rank's profiler writes
        (folder / f"r{i}").mkdir(parents=True)
        shutil.copy(FIXTURES / name, folder / f"r{i}" / Path(name).name)
    return folder


def test_parallel_parse_equals_sequential(tmp_path: Path) -> None:
    folder = _capture(tmp_path / "torchprof")
    runs = {w: run_aorta(["parse", "torchprof", str(folder)], tmp_path, env={WORKERS_ENV: w})
            for w in ("1", "2")}
    for done in runs.values():
        assert done.returncode == 0, done.stderr
    sequential, parallel = (json.loads(runs[w].stdout) for w in ("1", "2"))
    assert sequential["torchprof_trace_count"] == len(TRACES)
    assert parallel == sequential


def test_a_shared_pool_parses_as_a_fresh_one(tmp_path: Path, monkeypatch) -> None:
    from aorta_torchprof.parse import parse_dir

    folder = _capture(tmp_path / "torchprof")
    monkeypatch.setenv(WORKERS_ENV, "1")
    sequential = parse_dir(folder)
    monkeypatch.setenv(WORKERS_ENV, "2")
    with shared_workers():  # twice on one pool, as a command over several trials does
        shared = [parse_dir(folder), parse_dir(folder)]
    assert shared == [sequential, sequential]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the workers")
@pytest.mark.parametrize(("signum", "status", "how"), [
    (signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")])
def test_a_stopped_parse_ends_its_workers_and_says_so(tmp_path: Path, signum, status, how):
    """Signalled while its workers parse, `aorta parse` ends them with it (the workers of a
    process killed by SIGTERM outlived it) and says so in one line."""
    doc = json.loads(gzip.decompress((FIXTURES / TRACES[3]).read_bytes()))
    events = doc["traceEvents"]
    for rank in range(6):  # ~70 MB each: long enough to be caught at work
        doc["traceEvents"] = events * 8
        doc["distributedInfo"]["rank"] = rank
        (tmp_path / "torchprof" / f"r{rank}").mkdir(parents=True)
        (tmp_path / "torchprof" / f"r{rank}" / "t.pt.trace.json").write_text(json.dumps(doc))
    proc = subprocess.Popen([sys.executable, "-m", "aorta_core", "parse", "torchprof",
                             str(tmp_path / "torchprof")], cwd=tmp_path, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, WORKERS_ENV: "2"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        workers = [pid for pid in _descendants(proc.pid) if pid != proc.pid]
        time.sleep(0.01)
    assert workers, "the parse ended before its workers could be seen"
    proc.send_signal(signum)
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == status, stderr
    assert stderr.strip().splitlines() == [
        f"aorta: error: {how}: aorta parse stopped before its end; no file is left "
        "half-written: run it again"]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _alive(pid)], "workers outlived the parse"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False
