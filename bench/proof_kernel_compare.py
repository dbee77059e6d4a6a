"""Proof of the kernel-level comparison on a real profiler (issue 42), torchprof on the CPU by
default: ``--pairs`` A/A pairs (two sweeps of the same command each, ``--trials`` trials, one
after the other) and one pair grown by ``--grow`` (examples/reports/kernels/ops.py: its sort),
each compared with the real ``aorta compare --json``, without a noise floor and with the floor
of the previous A/A pair (``--noise-floor RUN1,RUN2``; the first pair takes the last's).
Prints one JSON line: per A/A pair the kernel rows flagged either way (a family-wise false
alarm: any), and the grown pair's ``--kernel`` rows and every flagged row. Sweeps already in
``--out`` are kept (a re-run only compares).

    python bench/proof_kernel_compare.py --out runs/proof [--pairs 20] [--trials 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples/reports/kernels"


def sweep(out: Path, args: argparse.Namespace, *overrides: str) -> Path:
    if not (out / "matrix.json").is_file():
        subprocess.run([sys.executable, "-m", "aorta_core", "sweep=repeat",
                        f"trials={args.trials}", f"collector={args.collector}", f"output={out}",
                        *overrides, "--", sys.executable, str(args.payload)],
                       check=True, capture_output=True)
    return out


def compare(a: Path, b: Path, floor: tuple[Path, Path] | None = None) -> dict:
    more = ["--noise-floor", f"{floor[0]},{floor[1]}"] if floor else []
    done = subprocess.run([sys.executable, "-m", "aorta_core", "compare", str(a), str(b),
                           "--json", *more], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def flagged(result: dict) -> list[dict]:
    return [{"name": r["name"], "delta_ms": round(r["delta_ms"], 3), "q": r["q"]}
            for r in result["kernels"] if r["significant"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--payload", type=Path, default=EXAMPLES / "ops.py")
    parser.add_argument("--grow", default="SORT_SCALE=1.3",
                        help="the grown run's environment variable (gemms.py: GROW=1.03)")
    parser.add_argument("--kernel", default="aten::sort",
                        help="a piece of the grown kernel's name")
    parser.add_argument("--collector", default="torchprof")
    args = parser.parse_args()
    start = time.time()
    runs = [tuple(sweep(args.out / f"aa{i}_{side}", args) for side in "ab")
            for i in range(args.pairs)]
    pairs = []
    for i, (a, b) in enumerate(runs):
        result, floored = compare(a, b), compare(a, b, runs[i - 1])
        pairs.append({"rows": len(result["kernels"]),
                      "tested": sum(r["p"] is not None for r in result["kernels"]),
                      "flagged": flagged(result), "flagged_beyond_floor": flagged(floored)})
    base = sweep(args.out / "grown_base", args)
    grown = sweep(args.out / "grown", args, f"+env.{args.grow}")
    result, floored = compare(base, grown), compare(base, grown, runs[-1])
    grown_rows = [r for r in result["kernels"] if args.kernel in r["name"]]
    print(json.dumps({
        "proof": "kernel_compare", "collector": args.collector, "trials": args.trials,
        "aa_pairs": len(pairs),
        "aa_family_wise_false_alarms": sum(bool(p["flagged"]) for p in pairs),
        "aa_family_wise_false_alarms_beyond_floor": sum(bool(p["flagged_beyond_floor"])
                                                        for p in pairs),
        "aa_rows_flagged": sum(len(p["flagged"]) for p in pairs),
        "aa_rows_flagged_beyond_floor": sum(len(p["flagged_beyond_floor"]) for p in pairs),
        "aa_rows_tested": sum(p["tested"] for p in pairs), "aa": pairs,
        "grown": {"env": args.grow, "rows": grown_rows, "flagged": flagged(result),
                  "flagged_beyond_floor": flagged(floored),
                  "summaries": result["kernel_summaries"]},
        "seconds": round(time.time() - start)}))


if __name__ == "__main__":
    main()
