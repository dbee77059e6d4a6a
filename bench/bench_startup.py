"""Start-up of the tools: `aorta parse torchprof` of a near-empty trace vs `import aorta_core`.

Each command runs in a fresh interpreter, interleaved (import, parse, report, import, ...), and
the medians of ``--repeat`` runs are compared in the same run, so the machine's load falls on
both. ``aorta report sweep`` of a folder with no sweep (it says so and exits 2) measures what
``aorta report`` costs before it reads anything. ``pool_start_s``: a parse of two near-empty
traces (in worker processes) less one (in-process): the pool's start-up, once per command.

Target (issue 27): `aorta parse torchprof` of a near-empty trace <= 2x `import aorta_core`.

    python bench/bench_startup.py [--repeat 15] [--before DIR]
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

from bench_torchprof_parse import make_trace


def _seconds(argv: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--before", type=Path, help="a checkout of an older aorta_core (e.g. "
                        "`git worktree add /tmp/before <commit>`): its parse is timed too, "
                        "interleaved, with PYTHONPATH=<it>")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "torchprof"
        folder.mkdir()
        make_trace(folder / "rank0.pt.trace.json", 10)
        two = Path(tmp) / "two"  # two files: the worker pool starts (one runs in-process)
        two.mkdir()
        for rank in range(2):
            make_trace(two / f"rank{rank}.pt.trace.json", 10, seed=rank, rank=rank, world_size=2)
        commands = {
            "import_aorta_core": [sys.executable, "-c", "import aorta_core"],
            "parse_torchprof": [sys.executable, "-m", "aorta_core", "parse", "torchprof",
                                str(folder)],
            "parse_two_files": [sys.executable, "-m", "aorta_core", "parse", "torchprof",
                                str(two)],
            "report_sweep_empty": [sys.executable, "-m", "aorta_core", "report", "sweep", tmp],
            "python_bare": [sys.executable, "-c", "pass"],
        }
        envs: dict[str, dict | None] = dict.fromkeys(commands)
        if args.before:
            for name in ("parse_torchprof", "report_sweep_empty"):
                commands[f"{name}_before"] = commands[name]
                envs[f"{name}_before"] = {**os.environ, "PYTHONPATH": str(args.before)}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for name, argv in commands.items():  # warm the file cache
            _seconds(argv, envs.get(name))
        for _ in range(args.repeat):
            for name, argv in commands.items():
                times[name].append(_seconds(argv, envs.get(name)))
        size = (folder / "rank0.pt.trace.json").stat().st_size
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["import_aorta_core"]
    summary = {
        "bench": "startup", "cores": len(os.sched_getaffinity(0)), "repeat": args.repeat,
        "trace_bytes": size, **{f"{k}_s": round(v, 3) for k, v in median.items()},
        "parse_vs_import": round(median["parse_torchprof"] / base, 2),
        "report_vs_import": round(median["report_sweep_empty"] / base, 2),
        "pool_start_s": round(median["parse_two_files"] - median["parse_torchprof"], 3),
        "target_ratio": 2.0,
    }
    if args.before:
        summary["before_parse_vs_import"] = round(median["parse_torchprof_before"] / base, 2)
        summary["before_report_vs_import"] = round(median["report_sweep_empty_before"] / base, 2)
    summary["targets_met"] = summary["parse_vs_import"] <= 2.0
    for key, value in summary.items():
        print(f"{key:22s} {value}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
