"""Benchmark: the statistics of ``aorta compare`` for many rows at once (issue 42, item 3's
budget: 5 cells × 300 kernels × 10 trials compared in ≤ 1 s).

``significance.compare_rows`` on ``--rows`` rows of ``--trials`` trials a side (normal noise,
every third row shifted by two standard deviations, one q family per 300 rows), once to import
scipy and warm up, then best of ``--repeat``. Prints one JSON line
(``{"bench": "compare_rows", ...}``).

    python bench/bench_compare_rows.py [--rows 1500] [--trials 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from aorta_core.reports.significance import compare_rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    base = rng.normal(10, 1, (args.rows, args.trials))
    shift = 2.0 * (np.arange(args.rows) % 3 == 0)
    cand = rng.normal(10, 1, (args.rows, args.trials)) + shift[:, None]
    families = [i // 300 for i in range(args.rows)]
    start = time.perf_counter()
    compare_rows(base.tolist(), cand.tolist(), 0.05, families)
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        stats = compare_rows(base.tolist(), cand.tolist(), 0.05, families)
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"bench": "compare_rows", "rows": args.rows, "trials": args.trials,
                      "first_s": round(first, 3), "best_s": round(best, 3),
                      "significant": sum(s.significant for s in stats)}))


if __name__ == "__main__":
    main()
