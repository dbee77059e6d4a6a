"""The piece size of ``aorta_core.api.decode_pieces``: torchprof's parse of one generated ~160 MB
rank trace (``summarise``) and ``aorta diagnose``'s reading of it (``read_rank``), in pieces of
128 KiB to 16 MiB, on this machine's CPU.

Why it matters: a piece is decoded, then filtered (and, for the diagnosis, made into columns)
while its events are still in the core's cache, so the best size follows the cache (the L2 of
the CPU is recorded). Reference, measured in the same run: the same two reads at every size,
interleaved. Target: ``PIECE_BYTES`` within 5 % of the best size's time for both readers.

    python bench/bench_piece_size.py [--tiles 22] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from aorta_torchprof.summary import summarise
from bench_timeline import make_capture

from aorta_core.api import trace_pieces
from aorta_core.reports.rank_traces import read_rank

SIZES_KIB = (128, 256, 512, 1024, 2048, 4096, 16384)


def _l2() -> str:
    index = Path("/sys/devices/system/cpu/cpu0/cache/index2/size")
    return index.read_text().strip() if index.exists() else "unknown"


def _timed(read) -> float:
    start = time.perf_counter()
    read()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=22, help="~7.3 MB each (22: ~160 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ours = trace_pieces.PIECE_BYTES
    times: dict[str, dict[int, list[float]]] = {"parse": {}, "diagnose": {}}
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / "trial_000"
        make_capture(trial, 1, args.tiles)
        (path,) = trial.glob("torchprof/rank0/*.json")
        readers = {"parse": lambda: summarise(path, path.parent, False),
                   "diagnose": lambda: read_rank([path], trial, print)}
        for _ in range(args.repeat):  # interleaved, so the machine's load falls on every size
            for kib in SIZES_KIB:
                trace_pieces.PIECE_BYTES = kib << 10
                for name, read in readers.items():
                    times[name].setdefault(kib, []).append(_timed(read))
        trace_pieces.PIECE_BYTES = ours
        size = path.stat().st_size
    summary: dict = {"bench": "piece_size", "file_bytes": size, "repeat": args.repeat,
                     "l2_cache": _l2(), "ours_kib": ours >> 10}
    met = True
    for name, by_size in times.items():
        medians = {kib: statistics.median(v) for kib, v in by_size.items()}
        best = min(medians, key=medians.__getitem__)
        summary[name] = {"median_s": {str(k): round(v, 3) for k, v in medians.items()},
                         "best_kib": best,
                         "ours_vs_best": round(medians[ours >> 10] / medians[best], 3)}
        met = met and summary[name]["ours_vs_best"] <= 1.05
    summary["targets_met"] = met
    print(json.dumps(summary, indent=1), file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
