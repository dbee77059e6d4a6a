"""64 ranks: `aorta parse torchprof`, `aorta report overlap`, `aorta timeline --ranks` and
`aorta diagnose` over a generated capture, wall time and peak memory (parent and worker
processes).

The capture is ``bench_timeline.make_capture``'s: per rank, the real H200 benchmark trace (the
torchprof fixture) repeated ``--tiles`` times (~7.3 MB a tile), in
``trial_000/torchprof/rank<R>/``, plus each rank's benchmark JSONL (the overlap report's input).
``cpu_control_ratio``: as many CPU-bound interpreters as cores at once vs one after another
(1/cores on an idle machine; near 1 when other work holds the cores). Each command runs the
real CLI (``aorta_core.app.cli.main``) in a fresh subprocess that samples
the VmHWM of its descendants (the parse workers, forked by the forkserver) every 10 ms.

Reference, measured in the same run: the same parse with ``AORTA_WORKERS=1`` (one file after
another in one process: the sum of the per-file parse times). Targets (issue 27):
- 64 ranks: parse wall <= 1.3 x (sum of per-file parse times / cores);
- each worker's peak <= 2.5 x the largest file, the parent's added peak <= 0.25 x one file
  (``*_added``: above the process's RSS before the command; the whole RSS is given too);
- 8 ranks (``--eight``): parallel <= 0.6 x sequential on 2 cores (0.2 x on 16), and (issue 25)
  ``aorta diagnose`` <= 1.5 x the parallel parse of the same traces; these are the walls of
  ``python -m aorta_core ...`` as a user runs it (the measuring process above also imports
  every command's modules and samples memory: ~0.7 s more on the H200 host). ``independent_s``:
  each rank parsed by its own command, all at once, the floor of any parallel parse here.
  ``diagnose_sequential_s``: the diagnosis with ``AORTA_WORKERS=1``; against the sequential
  parse it tells the per-file cost of the two reads from what the pools and the parents add.
On 2 cores use small files (``--tiles 1``: ~7 MB); the issue's 100-200 MB per rank
(``--tiles 20``, ~9.4 GB for 64 ranks) is for a big machine (e.g. the 16-core H200 host).

    python bench/bench_ranks.py [--ranks 64] [--tiles 1] [--repeat 1] [--eight] [--keep DIR]
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

from bench_parallel_parse import cpu_control, pool_peaks
from bench_timeline import make_capture
from bench_torchprof_parse import status_bytes


def _argv(kind: str, trial: Path) -> list[str]:
    """The `aorta` command line of ``kind`` over ``trial``."""
    out = trial.parent / f"out_{kind}"
    ranks = len(list(trial.glob("torchprof/rank*")))
    out.mkdir(parents=True, exist_ok=True)
    return {
        "parse": ["parse", "torchprof", str(trial / "torchprof")],
        "parse_sequential": ["parse", "torchprof", str(trial / "torchprof")],
        "overlap": ["report", "overlap", "--log-dir", str(trial / "benchmark"), "--output",
                    str(out), "--no-png"],
        "timeline": ["timeline", str(trial), "--ranks", f"0-{ranks - 1}", "--output",
                     str(out / "timeline.json")],
        "diagnose": ["diagnose", str(trial), "--json"],
        "diagnose_sequential": ["diagnose", str(trial), "--json"],
    }[kind]


def _env(kind: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AORTA_WORKERS", None)
    if kind.endswith("_sequential"):
        env["AORTA_WORKERS"] = "1"
    return env


def _command_wall(kind: str, trial: Path) -> float:
    """Seconds of ``python -m aorta_core <kind's command>`` as a user runs it: the interpreter's
    start, the command's own imports and its exit (no measuring harness in that process)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aorta_core", *_argv(kind, trial)], env=_env(kind),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _independent_wall(trial: Path) -> float:
    """Seconds for each rank's folder parsed by its own ``python -m aorta_core parse torchprof``,
    all started at once: the floor of any parallel parse on this machine (no pool, no shared
    parent; each command's start-up and one file's parse, as many at once as there are ranks)."""
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "aorta_core", "parse", "torchprof", str(rank)],
                              env=_env("parse"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
             for rank in sorted((trial / "torchprof").glob("rank*"))]
    if any(proc.wait() for proc in procs):
        raise SystemExit("an independent parse failed")
    return time.perf_counter() - start


def _measure(kind: str, trial: Path, result: Path) -> None:
    """In this fresh process: run the command through the real CLI; wall time, own peak RSS,
    and each worker's (children of the forkserver) peak RSS and the forkserver's."""
    # imported first: start-up, not the command's memory (`before` counts them)
    import importlib

    from aorta_core.app.cli import main

    for module in ("aorta_torchprof.parse", "aorta_core.reports.overlap_report",
                   "aorta_core.reports.timeline", "aorta_core.reports.diagnose"):
        importlib.import_module(module)

    argv = _argv(kind, trial)
    before = status_bytes("VmRSS")
    with pool_peaks() as peaks:
        start = time.perf_counter()
        status = main(argv)
        seconds = time.perf_counter() - start
    result.write_text(json.dumps({
        "kind": kind, "status": status, "seconds": seconds, "parent_rss_before": before,
        "parent_peak": status_bytes("VmHWM"),
        "worker_peaks": sorted(peaks.workers.values(), reverse=True),
        "forkserver_peak": peaks.forkserver}))


def _run(kind: str, trial: Path) -> dict:
    result = trial.parent / f"result_{kind}.json"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--measure", kind, str(trial), str(result)],
                          env=_env(kind), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0 or not result.exists():
        raise SystemExit(f"{kind} failed ({done.returncode}): {done.stderr[-2000:]}")
    row = json.loads(result.read_text())
    row["process_wall_s"] = wall  # with the interpreter's start, the harness's imports, exit
    return row


def _eight(root: Path, tiles: int, repeat: int, trial: Path | None) -> dict:
    """8 ranks: ``trial`` when the main capture has 8, else one made for it."""
    if trial is None:
        trial = root / "eight" / "trial_000"
        make_capture(trial, 8, tiles)
    kinds = ("parse_sequential", "parse", "diagnose_sequential", "diagnose")
    walls: dict[str, list[float]] = {kind: [] for kind in (*kinds, "independent")}
    for _ in range(repeat):  # interleaved, so the machine's load falls on all of them
        for kind in kinds:
            walls[kind].append(_command_wall(kind, trial))
        walls["independent"].append(_independent_wall(trial))
    seq_s, par_s, diagnose_seq_s, diagnose_s, alone_s = (
        statistics.median(walls[kind]) for kind in (*kinds, "independent"))
    return {"ranks": 8, "sequential_s": round(seq_s, 3), "parallel_s": round(par_s, 3),
            "parallel_vs_sequential": round(par_s / seq_s, 3),
            "independent_s": round(alone_s, 3),
            "independent_vs_sequential": round(alone_s / seq_s, 3),
            "diagnose_s": round(diagnose_s, 3), "diagnose_vs_parse": round(diagnose_s / par_s, 3),
            # one process each, the files one after another: the per-file cost of the two reads
            # apart from the pools' start and the parent's own work
            "diagnose_sequential_s": round(diagnose_seq_s, 3),
            "sequential_diagnose_vs_parse": round(diagnose_seq_s / seq_s, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--tiles", type=int, default=1,
                        help="fixture copies per rank, ~7.3 MB each (20: ~150 MB a rank)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--eight", action="store_true",
                        help="also 8 ranks, sequential vs parallel (the 0.6x / 0.2x target)")
    parser.add_argument("--keep", type=Path, help="write the capture here and keep it")
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure(args.measure[0], Path(args.measure[1]), Path(args.measure[2]))
        return
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        trial = root / "trial_000"
        start = time.perf_counter()
        capture = make_capture(trial, args.ranks, args.tiles)
        generate_s = time.perf_counter() - start
        sizes = [p.stat().st_size for p in trial.glob("torchprof/rank*/*.json")]
        rows: dict[str, list[dict]] = {}
        for _ in range(args.repeat):
            for kind in ("parse_sequential", "parse", "overlap", "timeline", "diagnose"):
                rows.setdefault(kind, []).append(_run(kind, trial))
        eight = _eight(root, args.tiles, max(args.repeat, 3),
                       trial if args.ranks == 8 else None) if args.eight else None
        control = cpu_control(cores)
    largest = max(sizes)

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[kind])

    summary: dict = {"bench": "ranks", "cores": cores, "ranks": args.ranks,
                     "tiles": args.tiles, "largest_file_bytes": largest,
                     "files_bytes_total": capture["input_bytes"],
                     "generate_s": round(generate_s, 1), "repeat": args.repeat,
                     "sum_per_file_parse_s": round(med("parse_sequential", "seconds"), 3),
                     "cpu_control_ratio": round(control, 3)}
    for kind in ("parse", "overlap", "timeline", "diagnose"):
        worst = max(rows[kind], key=lambda r: r["parent_peak"])
        summary[kind] = {
            "wall_s": round(med(kind, "seconds"), 3),
            "process_wall_s": round(med(kind, "process_wall_s"), 3),
            "status": worst["status"],
            "parent_peak_mb": round(worst["parent_peak"] / 1e6, 1),
            "parent_peak_added_vs_file": round(
                (worst["parent_peak"] - worst["parent_rss_before"]) / largest, 3),
            "workers": len(worst["worker_peaks"]),
        }
        if worst["worker_peaks"]:
            base = worst["forkserver_peak"]
            summary[kind]["worker_peak_mb"] = round(worst["worker_peaks"][0] / 1e6, 1)
            summary[kind]["worker_peak_vs_file"] = round(worst["worker_peaks"][0] / largest, 3)
            summary[kind]["worker_peak_added_vs_file"] = round(
                (worst["worker_peaks"][0] - base) / largest, 3)
    bound = summary["sum_per_file_parse_s"] / cores
    summary["parse_wall_vs_sum_per_cores"] = round(summary["parse"]["wall_s"] / bound, 3)
    summary["parse_process_wall_vs_sum_per_cores"] = round(
        summary["parse"]["process_wall_s"] / bound, 3)
    if eight is not None:
        summary["eight"] = eight
        summary["eight"]["target_ratio"] = 0.6 if cores <= 2 else 0.2
    parse = summary["parse"]
    summary["targets_met"] = {
        "parse_wall": summary["parse_wall_vs_sum_per_cores"] <= 1.3,
        "worker_peak_added": parse.get("worker_peak_added_vs_file", 0) <= 2.5,
        "parent_peak_added": parse["parent_peak_added_vs_file"] <= 0.25,
        **({"eight": eight["parallel_vs_sequential"] <= summary["eight"]["target_ratio"],
            "eight_diagnose": eight["diagnose_vs_parse"] <= 1.5} if eight else {}),
    }
    print(json.dumps(summary, indent=1), file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
