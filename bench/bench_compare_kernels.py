"""Benchmark: ``aorta compare`` of two runs at kernel level (issue 42: 5 cells × 10 trials × 300
kernels compared in ≤ 1 s).

Each run: 5 cells of 10 passing trials, each trial a record (bench_core's) and a
``kernels.parquet`` of 300 kernels × 3 profiled steps (normal noise of 2 %); in the candidate
every 30th kernel takes 10 % longer. Both runs' matrix files are built by ``aorta matrix``'s
code. Measured, best of ``--repeat``: ``compare`` in this process once scipy and polars are
imported (``compare_s``; the first call, imports included, as ``first_s``), the real
``aorta compare A B --json`` in a fresh interpreter (``cli_s``), and the reference no kernel
comparison can go below: reading every kernel table's bytes and decoding it with polars
(``read_tables_s``). Prints one JSON line (``{"bench": "compare_kernels", ...}``).

    python bench/bench_compare_kernels.py [--cells 5] [--trials 10] [--kernels 300]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np
from bench_core import _fake_record

from aorta_core.engine.kernel_tables import write_table
from aorta_core.engine.matrix import build
from aorta_core.engine.records import TrialRecord, write_record

STEPS = (1, 2, 3)


def write_run(out: Path, cells: int, trials: int, kernels: int, slower: float, seed: int) -> None:
    base = np.random.default_rng(0).uniform(0.01, 2.0, kernels)  # the same kernels in both
    rng = np.random.default_rng(seed)
    scale = np.where(np.arange(kernels) % 30 == 0, slower, 1.0)
    for c in range(cells):
        for t in range(trials):
            folder = out / "cells" / f"size={c}" / f"trial_{t:03d}"
            folder.mkdir(parents=True)
            record = _fake_record(c, t) | {"verdict": "pass"}
            write_record(folder / "record.json", msgspec.convert(record, TrialRecord))
            ms = base * scale * rng.normal(1, 0.02, (len(STEPS), kernels))
            write_table(folder / "kernels.parquet", [
                ("c0", f"kernel_{k}_with_a_long_name", f"kernel_{k}_with_a_long_name",
                 "gpu_kernel", step, 4, float(ms[i, k]))
                for i, step in enumerate(STEPS) for k in range(kernels)])
    build(out)


def read_tables(*runs: Path) -> int:
    import polars as pl

    return sum(pl.read_parquet(io.BytesIO(p.read_bytes())).height
               for run in runs for p in run.glob("cells/*/trial_*/kernels.parquet"))


def best(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--kernels", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        write_run(a, args.cells, args.trials, args.kernels, 1.0, 1)
        write_run(b, args.cells, args.trials, args.kernels, 1.1, 2)
        from aorta_core.reports.compare import compare

        start = time.perf_counter()
        result = compare(a, b)
        first = time.perf_counter() - start
        compare_s = best(args.repeat, lambda: compare(a, b))
        reference = best(args.repeat, lambda: read_tables(a, b))
        cli = best(args.repeat, lambda: subprocess.run(
            [sys.executable, "-m", "aorta_core", "compare", str(a), str(b), "--json"],
            check=True, capture_output=True))
    flagged = [r for r in result.kernels if r.significant]
    print(json.dumps({
        "bench": "compare_kernels", "cells": args.cells, "trials": args.trials,
        "kernels": args.kernels, "rows": len(result.kernels), "first_s": round(first, 3),
        "compare_s": round(compare_s, 3), "cli_s": round(cli, 3),
        "read_tables_s": round(reference, 3),
        "ratio_vs_read_tables": round(compare_s / reference, 2),
        "flagged": len(flagged),
        "flagged_shifted": sum(int(r.name.split("_")[1]) % 30 == 0 for r in flagged),
        "shifted": args.cells * len(range(0, args.kernels, 30)),
        "target_s": 1.0, "ok": compare_s <= 1.0}))


if __name__ == "__main__":
    main()
