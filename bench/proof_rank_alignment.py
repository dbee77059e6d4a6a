"""Proof of the ranks' clock alignment (issue 43) on gloo CPU ranks of one host: the benchmark
(FSDP, the tiny model, profiled steps 2-11) with 2 and 4 ranks; per rank the fit's bound and
collectives on the untouched traces (one host: every true offset and drift is 0), then rank 1
moved by known offsets and drifts as if its host's clock differed (its Kineto trace only), and
how far the fit places its collectives' ends from where they truly were, against the bound the
fit states.

Prints one JSON line. The ``host_name`` of a moved rank is left as it is: the fit is what is
measured here, not the shortcut that keeps same-host ranks on one clock.

    python bench/proof_rank_alignment.py --out runs/align [--ranks 2 4] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from aorta_core.reports.collectives import matched
from aorta_core.reports.rank_alignment import RankClock, align_ranks
from aorta_core.reports.rank_traces import RankTrace, read_ranks

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
BENCH = ["device=cpu", "parallel=fsdp", "training.max_steps=12", "data.batch_size=2",
         "data.sequence_length=4", "profiling.enabled=true", "profiling.wait=0",
         "profiling.warmup=2", "profiling.active=10", "telemetry.matmul_reference=false"]
#: (offset µs, drift ppm) rank 1 is moved by.
MOVES = [(100.0, 50.0), (10_000.0, -50.0), (100_000.0, 100.0)]


def run(trial: Path, nproc: int) -> Path:
    if not (trial / "benchmark").is_dir():
        env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
        env |= {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
        subprocess.run([TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m",
                        "aorta_core.benchmark", *BENCH, f"output_dir={trial / 'benchmark'}"],
                       env=env, check=True, capture_output=True, timeout=600)
    return trial


def trace_file(trial: Path, rank: int) -> Path:
    (path,) = (trial / "benchmark" / "torch_profiler" / f"rank{rank}").glob("*.json")
    return path


def read(trial: Path, ranks: int) -> dict[int, RankTrace]:
    return read_ranks({r: [trace_file(trial, r)] for r in range(ranks)}, trial, print)


def ends(traces: dict[int, RankTrace], rank: int) -> list[float]:
    """Unix µs at which ``rank``'s collectives shared with rank 0 end, on its own clock."""
    pair = {0: traces[0], rank: traces[rank]}
    steps = sorted(set(traces[0].steps) & set(traces[rank].steps))
    return [traces[rank].base_ns / 1e3 + c.spans[rank][1] for c in matched(pair, steps)]


def moved_copy(trial: Path, to: Path, offset_us: float, drift_ppm: float, about_us: float,
               base_us: float) -> Path:
    """``trial`` with rank 1's trace on a clock ``offset_us`` ahead at ``about_us`` and
    ``drift_ppm`` fast (its durations too)."""
    shutil.copytree(trial, to)
    path = trace_file(to, 1)
    doc = json.loads(path.read_text())
    rate = 1 + drift_ppm * 1e-6
    for event in doc["traceEvents"]:
        if "ts" in event:
            event["ts"] = about_us + offset_us + (base_us + event["ts"] - about_us) * rate \
                - base_us
        if "dur" in event:
            event["dur"] *= rate
    path.write_text(json.dumps(doc))
    return to


def untouched(traces: dict[int, RankTrace]) -> dict[str, dict]:
    out = {}
    for rank, clock in align_ranks(traces).items():
        out[str(rank)] = ({"bound_us": round(clock.bound_us, 1), "collectives": clock.collectives,
                           "offset_us": round(clock.offset_us, 1),
                           "drift_ppm": round(clock.drift_ppm, 1)}
                          if isinstance(clock, RankClock) else {"reason": clock})
    return out


def moved(trial: Path, traces: dict[int, RankTrace], ranks: int, scratch: Path) -> list[dict]:
    truth = ends(traces, 1)
    about, base = truth[0], traces[1].base_ns / 1e3
    rows = []
    for offset_us, drift_ppm in MOVES:
        to = scratch / f"moved_{offset_us:g}_{drift_ppm:g}"
        shutil.rmtree(to, ignore_errors=True)
        clock = align_ranks(read(moved_copy(trial, to, offset_us, drift_ppm, about, base),
                                 ranks))[1]
        rate = 1 + drift_ppm * 1e-6
        placed = [clock.place(about + offset_us + (t - about) * rate) for t in truth]
        errors = [abs(p - t) for p, t in zip(placed, truth, strict=True)]
        rows.append({"offset_us": offset_us, "drift_ppm": drift_ppm,
                     "bound_us": round(clock.bound_us, 1),
                     "worst_error_us": round(max(errors), 1),
                     "within_bound": max(errors) <= clock.bound_us,
                     "found_offset_us": round(clock.offset_us, 1),
                     "found_drift_ppm": round(clock.drift_ppm, 1)})
        shutil.rmtree(to)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    started, results = time.time(), []
    for ranks in args.ranks:
        for repeat in range(args.repeats):
            trial = run(args.out / f"ranks{ranks}_{repeat}", ranks)
            traces = read(trial, ranks)
            results.append({"ranks": ranks, "repeat": repeat, "untouched": untouched(traces),
                            "moved_rank_1": moved(trial, traces, ranks, args.out)})
    print(json.dumps({"proof": "rank_alignment", "host": platform.node(),
                      "cores": len(os.sched_getaffinity(0)),
                      "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
                      "seconds": round(time.time() - started, 1), "results": results}))


if __name__ == "__main__":
    main()
