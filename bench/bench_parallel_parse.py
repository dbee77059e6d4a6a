"""Multi-rank parse: eight ~160 MB rank traces, in parallel worker processes vs one after another.

Generates ``--ranks`` Kineto-shaped traces as ``bench_torchprof_parse.py`` does (one seed and
``distributedInfo.rank`` per rank) into one artifact folder, then, each in a fresh subprocess
and interleaved (sequential, parallel, sequential, ...), runs ``parse_dir`` with
``AORTA_WORKERS=1`` (the in-process, one-file-after-another path) and with the default workers
(``aorta_core.parallel_map``: one process per core). Reported: median wall times and their ratio,
the parent's peak RSS against the sum of the files, and each worker's peak RSS (sampled from
``/proc``) against the largest file. With ``--big-mb`` it also writes one trace of that size
and parses it in a subprocess whose address space is capped at ``--limit-gb`` (``RLIMIT_AS``).
``cpu_control_ratio``: the same number of CPU-bound interpreters at once vs one after another,
measured between the runs: the parallelism the (shared) machine actually gave.

Targets (issue 17): on 2 cores parallel <= 0.6x sequential, on 16 cores <= 0.2x; each worker
<= 2.5x its own file, the parent <= 0.25x the sum of the files; the 1 GB trace parses within
4 GB, or says clearly why not.

    python bench/bench_parallel_parse.py [--ranks 8] [--events 550000] [--repeat 3]
                                         [--big-mb 1024] [--limit-gb 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench_torchprof_parse import make_trace, status_bytes

METRICS = ("torchprof_kernel_count", "torchprof_rank_count", "torchprof_overlap_ratio")


def _write_rank(folder: Path, rank: int, ranks: int, events: int) -> int:
    path = folder / f"rank{rank}.pt.trace.json"
    make_trace(path, events, seed=rank, rank=rank, world_size=ranks)
    return path.stat().st_size


def generate(folder: Path, ranks: int, events: int) -> list[int]:
    """The rank traces, written by as many processes as there are cores."""
    folder.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(min(ranks, os.cpu_count() or 1)) as pool:
        return list(pool.map(_write_rank, [folder] * ranks, range(ranks), [ranks] * ranks,
                             [events] * ranks))


@dataclass
class PoolPeaks:
    """Peak RSS (VmHWM) of a pool's workers, by pid, and of its forkserver, in bytes."""

    workers: dict[int, int] = field(default_factory=dict)
    forkserver: int = 0


@contextmanager
def pool_peaks() -> Iterator[PoolPeaks]:
    """Inside the block, every 10 ms, the VmHWM of this process's pool: the forkserver (a child
    of this process with children) and its children, the workers. VmHWM only grows, so each
    process's last sample is its peak."""
    peaks, stop, me = PoolPeaks(), threading.Event(), os.getpid()

    def sample() -> None:
        while not stop.wait(0.01):
            tree = process_tree()
            for child in tree.get(me, []):
                workers = tree.get(child, [])
                if workers:
                    peaks.forkserver = max(peaks.forkserver, hwm(child))
                for pid in workers:
                    peaks.workers[pid] = max(peaks.workers.get(pid, 0), hwm(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        stop.set()
        sampler.join()


def process_tree() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from ``/proc``)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    return parents


def hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _measure(folder: Path) -> dict:
    """In this fresh process: parse the folder; wall time, own and workers' peak RSS."""
    from aorta_torchprof.parse import parse_dir

    with pool_peaks() as peaks:
        start = time.perf_counter()
        metrics = parse_dir(folder)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "parent_peak": status_bytes("VmHWM"),
            "worker_peaks": sorted(peaks.workers.values(), reverse=True),
            **{k: metrics.get(k) for k in METRICS}}


def _run(folder: Path, workers: int | None, limit_gb: float | None = None) -> dict:
    env = dict(os.environ)
    env.pop("AORTA_WORKERS", None)
    if workers is not None:
        env["AORTA_WORKERS"] = str(workers)
    argv = [sys.executable, __file__, "--measure", str(folder)]
    if limit_gb:
        argv += ["--as-limit-gb", str(limit_gb)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["warnings"] = [line for line in done.stderr.splitlines() if "torchprof" in line]
    return result


_SPIN = "n = 0\nfor i in range(4_000_000):\n    n += i"


def cpu_control(processes: int) -> float:
    """``processes`` CPU-bound interpreters at once vs one after another: the parallelism the
    machine gives right now (other load included), the bound for the parse's ratio."""
    argv = [sys.executable, "-c", _SPIN]
    start = time.perf_counter()
    for _ in range(processes):
        subprocess.run(argv, check=True)
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    for proc in [subprocess.Popen(argv) for _ in range(processes)]:
        proc.wait()
    return (time.perf_counter() - start) / sequential


def big_trace(folder: Path, mb: int, limit_gb: float) -> dict:
    """One ``mb`` trace (a 160 MB trace's events, repeated) parsed under an address-space cap."""
    folder.mkdir(parents=True, exist_ok=True)
    unit = folder.parent / "unit.pt.trace.json"
    make_trace(unit, 550_000)
    text = unit.read_bytes()
    head, rest = text.split(b'"traceEvents": [\n', 1)
    body, tail = rest.rsplit(b"\n  ],", 1)
    copies = max(round(mb * 1e6 / len(body)), 1)
    path = folder / "rank0.pt.trace.json"
    with path.open("wb") as fh:
        fh.write(head + b'"traceEvents": [\n' + body)
        for _ in range(copies - 1):
            fh.write(b",\n" + body)
        fh.write(b"\n  ]," + tail)
    unit.unlink()
    result = _run(folder, None, limit_gb)
    return {"file_bytes": path.stat().st_size, "limit_gb": limit_gb,
            "seconds": round(result["seconds"], 2), "parsed": result["torchprof_kernel_count"]
            is not None, "peak_vs_file": round(result["parent_peak"] / path.stat().st_size, 3),
            "warnings": result["warnings"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--events", type=int, default=550_000, help="events per rank")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=1024,
                        help="the big-trace check's size in MB (0: skip it)")
    parser.add_argument("--limit-gb", type=float, default=4.0)
    parser.add_argument("--keep", type=Path, help="write the traces here and keep them")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--as-limit-gb", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        if args.as_limit_gb:
            import resource

            cap = int(args.as_limit_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        print(json.dumps(_measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        folder = root / "torchprof"
        start = time.perf_counter()
        sizes = generate(folder, args.ranks, args.events)
        generate_s = time.perf_counter() - start
        runs: dict[str, list[dict]] = {"sequential": [], "parallel": []}
        control = []
        for _ in range(args.repeat):
            runs["sequential"].append(_run(folder, 1))
            runs["parallel"].append(_run(folder, None))
            control.append(cpu_control(min(args.ranks, len(os.sched_getaffinity(0)) * 4)))
        big = big_trace(root / "big", args.big_mb, args.limit_gb) if args.big_mb else None
    seq, par = runs["sequential"], runs["parallel"]
    if any({k: r[k] for k in METRICS} != {k: seq[0][k] for k in METRICS} for r in seq + par):
        print("MISMATCH between runs", file=sys.stderr)
        sys.exit(1)
    seq_s = statistics.median(r["seconds"] for r in seq)
    par_s = statistics.median(r["seconds"] for r in par)
    cores = len(os.sched_getaffinity(0))
    worker_peak = max(max(r["worker_peaks"], default=0) for r in par)
    parent_peak = max(r["parent_peak"] for r in par)
    summary = {
        "bench": "parallel_parse", "cores": cores, "ranks": args.ranks,
        "file_bytes_each": max(sizes), "files_bytes_total": sum(sizes),
        "generate_s": round(generate_s, 1), "repeat": args.repeat,
        "sequential_s": round(seq_s, 3), "parallel_s": round(par_s, 3),
        "parallel_vs_sequential": round(par_s / seq_s, 3),
        "target_ratio": 0.6 if cores <= 2 else 0.2,
        "cpu_control_ratio": round(statistics.median(control), 3),
        "worker_peak_vs_file": round(worker_peak / max(sizes), 3),
        "parent_peak_vs_files": round(parent_peak / sum(sizes), 3),
        "sequential_peak_vs_file": round(max(r["parent_peak"] for r in seq) / max(sizes), 3),
    }
    summary["targets_met"] = (summary["parallel_vs_sequential"] <= summary["target_ratio"]
                              and summary["worker_peak_vs_file"] <= 2.5
                              and summary["parent_peak_vs_files"] <= 0.25)
    if big is not None:
        summary["big_trace"] = big
    for key, value in summary.items():
        print(f"{key:26s} {value}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
