"""Benchmark: the core's own costs, each as a ratio against a reference measured in the same run.

- ``trial_overhead``: median time of a whole aorta trial (fresh folders, launch, record written
  atomically) minus a bare ``subprocess.run`` of the same command (``python -c pass``),
  interleaved so that both see the same machine state. Target: <= 30 ms.
- ``sweep_overhead``: the real CLI, ``python -m aorta_core sweep=repeat trials=N -- <cmd>``:
  per-trial time from the records' own clocks (first start to last record, over N) minus the
  median bare ``subprocess.run`` of ``<cmd>`` measured just before and after, for ``true`` and
  ``python -c pass``. Target: <= 30 ms.
- ``matrix``: ``aorta_core.engine.matrix.build`` over 1,000, 10,000 and 100,000 trial records
  (~2.4 KB each, written by ``write_record(TrialRecord(...))``) against merely walking the folders
  and reading those files' bytes (``Path.glob`` + ``read_bytes``) at each size. Target: <= 2x at
  100,000, and linear growth (the per-record cost stays flat from 1k to 100k). The ratio against
  the fastest possible walk (``os.scandir``, raw ``open``) is reported too.
- ``startup``: ``python -m aorta_core --help`` and ``aorta plugins`` wall time (medians,
  interleaved), next to ``python -c "import polars"``. Target: ``--help`` no slower than
  ``plugins``, both <= 1 s.

Prints a table and one JSON line (``{"bench": "core", ...}``).

    python bench/bench_core.py [--trials N] [--records 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from aorta_core.engine.matrix import build
from aorta_core.engine.plugins import load_registry
from aorta_core.engine.records import TrialRecord, write_record
from aorta_core.engine.trial import Cell, run_trial


def trial_overhead(trials: int, workdir: Path) -> dict:
    command = (sys.executable, "-c", "pass")
    cell = Cell(name="bench", directory=workdir / "cell", axes={}, command=command, env={},
                collectors={}, timeout_s=60, retain={}, fingerprint="bench")
    registry = load_registry()
    run_trial(cell, 0, registry)  # warm the environment snapshot and imports
    ours, bare = [], []
    for i in range(trials):
        start = time.perf_counter()
        subprocess.run(command, check=True)
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_trial(cell, i + 1, registry)
        ours.append(time.perf_counter() - start)
    overhead_ms = 1000 * (statistics.median(ours) - statistics.median(bare))
    return {"bare_ms": 1000 * statistics.median(bare), "aorta_ms": 1000 * statistics.median(ours),
            "overhead_ms": overhead_ms, "target_ms": 30, "ok": overhead_ms <= 30}


def _bare_ms(command: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True)
        out.append(1000 * (time.perf_counter() - start))
    return out


def sweep_overhead(trials: int, workdir: Path) -> dict:
    """Per-trial cost of the real CLI sweep over a bare ``subprocess.run`` of the command."""
    out = {}
    for label, command in (("true", ["true"]), ("python", [sys.executable, "-c", "pass"])):
        bare = _bare_ms(command, 10)
        folder = workdir / f"sweep-{label}"
        subprocess.run([sys.executable, "-m", "aorta_core", "sweep=repeat", f"trials={trials}",
                        f"output={folder}", "--", *command], check=True, capture_output=True)
        bare += _bare_ms(command, 10)
        records = [json.loads(p.read_bytes()) for p in folder.glob("cells/*/trial_*/record.json")]
        window = (max(r["recorded_at_unix"] for r in records)
                  - min(r["started_at_unix"] for r in records))
        per_trial = 1000 * window / len(records)
        out[label] = {"trials": len(records), "per_trial_ms": round(per_trial, 2),
                      "bare_ms": round(statistics.median(bare), 2),
                      "overhead_ms": round(per_trial - statistics.median(bare), 2)}
    out["target_ms"] = 30
    out["ok"] = all(v["overhead_ms"] <= 30 for v in out.values() if isinstance(v, dict))
    return out


def _fake_record(cell: int, trial: int) -> dict:
    """A record shaped like run_trial's (~2 KB): two collectors, a dozen numeric metrics each."""
    metrics = {f"c{k % 2}_metric_{k}_ms": 1.5 * k + trial for k in range(24)}
    metrics |= {"c0_top_kernels": [f"kernel_{k}_with_a_long_name" for k in range(5)],
                "c0_artifact_dir": f"/runs/x/cells/c{cell}/trial_{trial:03d}/c0"}
    return {"schema_version": 1, "cell": f"size={cell}", "axes": {"size": str(cell)},
            "trial": trial, "verdict": "pass" if trial % 10 else "fail", "error": None,
            "exit_code": 0, "timed_out": False, "wall_time_s": 1.0 + trial / 100,
            "argv": ["python", "train.py", "--size", str(cell)], "argv_run": ["python", "train.py"],
            "env_run": {"AORTA_TRIAL": str(trial)}, "cwd": "/home/user/project",
            "stdout": "stdout.log", "stderr": "stderr.log", "started_at": "2026-12-02T11:00:00",
            "environment": {"host": "bench-host", "os": "Linux-6.1-x86_64-with-glibc2.36",
                            "cpu": "AMD EPYC 9654 96-Core Processor", "cpu_count": 192,
                            "gpus": [{"vendor": "nvidia", "name": "NVIDIA H200",
                                      "driver": "580.1", "memory": "143771 MiB"}],
                            "python": "3.11.7", "python_executable": "/usr/bin/python3",
                            "packages": {"torch": "2.13.0", "triton": "3.6.0", "polars": "2.1"},
                            "collectors": {"c0": "0.1.0", "c1": "0.1.0"}},
            "collectors": {name: {"version": "0.1.0", "options": {"mode": "cli"},
                                  "artifacts": [f"{name}/trace.json"]} for name in ("c0", "c1")},
            "warnings": {}, "retention": {"level": "full", "deleted": []},
            "fingerprint": "0123456789abcdef", "metrics": metrics}


def _write_records(out: Path, records: int) -> list[int]:
    cells = max(records // 100, 1)
    for c in range(cells):
        cell_dir = out / "cells" / f"size={c}"
        for t in range(records // cells):
            (cell_dir / f"trial_{t:03d}").mkdir(parents=True)
            write_record(cell_dir / f"trial_{t:03d}" / "record.json",
                         msgspec.convert(_fake_record(c, t), TrialRecord))
    return [p.stat().st_size for p in out.glob("cells/*/trial_*/record.json")]


def walk_and_read(out: Path) -> int:
    """The plain way: glob the record files, read each one's bytes (the matrix's floor)."""
    return sum(len(p.read_bytes()) for p in out.glob("cells/*/trial_*/record.json"))


def matrix(records: int, workdir: Path, repeat: int) -> dict:
    out = workdir / f"sweep-{records}"
    sizes = _write_records(out, records)

    def scandir_floor() -> int:
        """The fastest walk Python offers: os.scandir and raw opens, no path objects."""
        total = 0
        for cell_dir in os.scandir(out / "cells"):
            for trial in os.scandir(cell_dir.path):
                with open(os.path.join(trial.path, "record.json"), "rb") as fh:
                    total += len(fh.read())
        return total

    timings: dict[str, list[float]] = {"walk": [], "floor": [], "build": []}
    build(out)  # warm imports (polars) and the page cache so that all timings are steady-state
    for _ in range(repeat):
        for name, fn in (("walk", lambda: walk_and_read(out)), ("floor", scandir_floor),
                         ("build", lambda: build(out))):
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in timings.items()}
    ratio = best["build"] / best["walk"]
    return {"records": len(sizes), "mean_record_bytes": round(statistics.mean(sizes)),
            "walk_read_s": round(best["walk"], 4), "scandir_read_s": round(best["floor"], 4),
            "build_s": round(best["build"], 4),
            "build_us_per_record": round(1e6 * best["build"] / len(sizes), 1),
            "walk_us_per_record": round(1e6 * best["walk"] / len(sizes), 1),
            "ratio": round(ratio, 3), "ratio_vs_scandir": round(best["build"] / best["floor"], 3)}


def startup() -> dict:
    py = sys.executable
    argvs = {"import_polars_s": [py, "-c", "import polars"], "python_bare_s": [py, "-c", "pass"],
             "aorta_plugins_s": [py, "-m", "aorta_core", "plugins"],
             "aorta_help_s": [py, "-m", "aorta_core", "--help"]}
    times: dict[str, list[float]] = {k: [] for k in argvs}
    for _ in range(7):  # interleaved, so that load hits every command alike
        for key, argv in argvs.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            times[key].append(time.perf_counter() - start)
    result = {k: round(statistics.median(v), 4) for k, v in times.items()}
    result["help_vs_plugins"] = round(result["aorta_help_s"] / result["aorta_plugins_s"], 3)
    result["ok"] = (result["aorta_help_s"] <= result["aorta_plugins_s"]
                    and result["aorta_plugins_s"] <= 1.0)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--records", default="1000,10000,100000",
                        help="matrix sizes, comma-separated; the target applies to the largest")
    parser.add_argument("--repeat", type=int, default=3, help="matrix timings: best of N")
    args = parser.parse_args()
    sizes = [int(n) for n in args.records.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "trial_overhead": trial_overhead(args.trials, Path(tmp)),
            "sweep_overhead": sweep_overhead(args.trials, Path(tmp)),
            **{f"matrix_{n}": matrix(n, Path(tmp), args.repeat) for n in sizes},
            "startup": startup(),
        }
    largest = results[f"matrix_{max(sizes)}"]
    per_record = [results[f"matrix_{n}"]["build_us_per_record"] for n in sizes]
    results["matrix_growth"] = {
        "records": sizes, "build_us_per_record": per_record,
        "walk_us_per_record": [results[f"matrix_{n}"]["walk_us_per_record"] for n in sizes],
        "largest_over_smallest_per_record": round(per_record[-1] / per_record[0], 3),
        "target_ratio": 2.0, "ok": largest["ratio"] <= 2.0}
    for name, values in results.items():
        print(f"{name:15s} " + "  ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()))
    print(json.dumps({"bench": "core", **results}))


if __name__ == "__main__":
    main()
