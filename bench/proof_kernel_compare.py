"""Proof of the kernel-level comparison on a real profiler (issue 42), torchprof on the CPU by
default: ``--pairs`` A/A pairs and one pair grown by ``--grow`` (examples/reports/kernels/ops.py:
its sort), each compared with the real ``aorta compare --json``.

``--design rounds`` (the default): each pair is one sweep of two cells, ``order=rounds``
(trial 0 of both cells, then trial 1, ...), compared with ``--pair``, without a noise floor and
with the floor of the sweep's own baseline cell: the A/A cells differ only by a variable nothing
reads, the grown pair by ``--grow``. ``--design runs``: each pair is two
sweeps run one after the other, compared without a noise floor and with the floor of the
previous A/A pair (``--noise-floor RUN1,RUN2``; the first pair takes the last's).

Prints one JSON line: per A/A pair the kernel rows flagged either way (a family-wise false
alarm: any), and per grown pair (``--grown-pairs``) the ``--kernel`` rows, every flagged row and
whether the grown kernel was flagged, and alone. Sweeps already in
``--out`` are kept (a re-run only compares).

    python bench/proof_kernel_compare.py --out runs/proof [--pairs 20] [--trials 8]
    python bench/proof_kernel_compare.py --out runs/gpu --pairs 1 --grown-pairs 10 --trials 10 \
        --payload examples/reports/kernels/gemms.py --grow GROW=1.03 --kernel _hsh_
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples/reports/kernels"
#: The variable the A/A cells of one sweep differ by: nothing reads it.
SIDE = "AORTA_PROOF_SIDE"


def sweep(out: Path, args: argparse.Namespace, *overrides: str) -> Path:
    if not (out / "matrix.json").is_file():
        subprocess.run([sys.executable, "-m", "aorta_core", "sweep=repeat",
                        f"trials={args.trials}", f"collector={args.collector}", f"output={out}",
                        *overrides, "--", sys.executable, str(args.payload)],
                       check=True, capture_output=True)
    return out


def compare(a: Path, b: Path, *more: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "aorta_core", "compare", str(a), str(b),
                           "--json", *more], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def flagged(result: dict) -> list[dict]:
    return [{"name": r["name"], "delta_ms": round(r["delta_ms"], 3), "q": r["q"]}
            for r in result["kernels"] if r["significant"]]


def rows_of(result: dict) -> dict:
    """How many rows the pair had and tested, and each tested row's noise floor as this A/A
    measures it (the far end of the difference's interval over the baseline, %), longest first:
    the smallest change of that kernel a comparison at these trials tells from noise."""
    tested = sorted((r for r in result["kernels"] if r["p"] is not None and r["baseline_ms"]),
                    key=lambda r: -r["baseline_ms"])
    floors = {r["name"][:80]: round(100 * max(abs(r["ci_low_ms"]), abs(r["ci_high_ms"]))
                                    / r["baseline_ms"], 2) for r in tested}
    return {"rows": len(result["kernels"]), "tested": len(tested), "floors_pct": floors}


def one_sweep_pair(out: Path, args: argparse.Namespace, key: str, a: str, b: str
                   ) -> tuple[dict, dict]:
    """Cells ``key=a`` and ``key=b`` of one ``order=rounds`` sweep, compared without a noise
    floor and with the floor of the sweep's own baseline cell (its trials split in halves)."""
    sweep(out, args, "order=rounds", f"+env.{key}={a},{b}")
    cells = [f"env.{key}={value},collector={args.collector}" for value in (a, b)]
    return (compare(out, out, "--pair", *cells),
            compare(out, out, "--pair", *cells, "--noise-floor", str(out)))


def in_time(args: argparse.Namespace, count: int) -> Iterator[int]:
    """The pairs to run, lazily: ``count``, fewer once ``--deadline`` seconds have passed when
    the next would start (a pair whose sweep is already in ``--out`` only compares)."""
    for i in range(count):
        if time.time() > args.deadline:
            return
        yield i


def by_rounds(args: argparse.Namespace) -> tuple[list[dict], list[tuple[dict, dict | None]]]:
    pairs = []
    for i in in_time(args, args.pairs):
        result, floored = one_sweep_pair(args.out / f"aa{i}", args, SIDE, "a", "b")
        pairs.append({**rows_of(result), "flagged": flagged(result),
                      "flagged_beyond_floor": flagged(floored)})
    key, value = args.grow.split("=", 1)
    return pairs, [one_sweep_pair(args.out / f"grown{i}", args, key, "1", value)
                   for i in in_time(args, args.grown_pairs)]


def by_runs(args: argparse.Namespace) -> tuple[list[dict], list[tuple[dict, dict | None]]]:
    runs = [tuple(sweep(args.out / f"aa{i}_{side}", args) for side in "ab")
            for i in in_time(args, args.pairs)]
    pairs = []
    for i, (a, b) in enumerate(runs):
        floor = ("--noise-floor", f"{runs[i - 1][0]},{runs[i - 1][1]}")
        result = compare(a, b)
        pairs.append({**rows_of(result), "flagged": flagged(result),
                      "flagged_beyond_floor": flagged(compare(a, b, *floor))})
    grown = []
    for i in in_time(args, args.grown_pairs):
        base = sweep(args.out / f"grown{i}_base", args)
        changed = sweep(args.out / f"grown{i}", args, f"+env.{args.grow}")
        floor = ("--noise-floor", f"{runs[-1][0]},{runs[-1][1]}")
        grown.append((compare(base, changed), compare(base, changed, *floor)))
    return pairs, grown


def median_floor(pairs: list[dict]) -> dict[str, float]:
    """Per kernel, the median over the A/A pairs of its floor (%), longest kernel first."""
    names = list(pairs[0]["floors_pct"]) if pairs else []
    return {name: statistics.median(p["floors_pct"][name] for p in pairs if name in p["floors_pct"])
            for name in names}


def grown_pair(args: argparse.Namespace, result: dict, floored: dict | None) -> dict:
    """The grown kernel's rows, every flagged row, and whether the grown kernel alone was
    flagged (``detected_alone``)."""
    rows = [r for r in result["kernels"] if args.kernel in r["name"]]
    marked = flagged(result)
    found = {"rows": rows, "flagged": marked, "summaries": result["kernel_summaries"],
             "detected": any(r["significant"] for r in rows),
             "detected_alone": bool(marked) and all(args.kernel in r["name"] for r in marked)}
    if floored is not None:
        beyond = flagged(floored)
        found |= {"flagged_beyond_floor": beyond, "detected_alone_beyond_floor":
                  bool(beyond) and all(args.kernel in r["name"] for r in beyond)}
    return found


def explained(found: list[dict], collector: str) -> dict:
    """Per grown pair, the share of the step difference its significant rows explain, and that
    of all pairs together (their sums): one pair's step difference is as noisy as its trials make
    it (±15 % of it on the H100), the sum over n pairs about √n times less."""
    shares = [s for g in found for s in g["summaries"]
              if s["collector"] == collector and s.get("reference_delta_ms")]
    if not shares:
        return {}
    return {"grown_explained": [s["explained"] for s in shares],
            "grown_explained_pooled": sum(s["significant_delta_ms"] for s in shares)
            / sum(s["reference_delta_ms"] for s in shares)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--design", choices=("rounds", "runs"), default="rounds")
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--payload", type=Path, default=EXAMPLES / "ops.py")
    parser.add_argument("--grow", default="SORT_SCALE=1.3",
                        help="the grown run's environment variable (gemms.py: GROW=1.03)")
    parser.add_argument("--kernel", default="aten::sort",
                        help="a piece of the grown kernel's name")
    parser.add_argument("--collector", default="torchprof")
    parser.add_argument("--grown-pairs", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds after which no new pair starts (a device call's limit)")
    args = parser.parse_args()
    start = time.time()
    args.deadline = start + (args.deadline if args.deadline is not None else float("inf"))
    pairs, grown = (by_rounds if args.design == "rounds" else by_runs)(args)
    summary = {
        "proof": "kernel_compare", "design": args.design, "collector": args.collector,
        "trials": args.trials, "payload": args.payload.name, "grow": args.grow,
        "aa_pairs": len(pairs),
        "aa_family_wise_false_alarms": sum(bool(p["flagged"]) for p in pairs),
        "aa_rows_flagged": sum(len(p["flagged"]) for p in pairs),
        "aa_rows_tested": sum(p["tested"] for p in pairs),
        "aa_median_floor_pct": median_floor(pairs)}
    if pairs and "flagged_beyond_floor" in pairs[0]:
        summary |= {"aa_family_wise_false_alarms_beyond_floor":
                    sum(bool(p["flagged_beyond_floor"]) for p in pairs),
                    "aa_rows_flagged_beyond_floor":
                    sum(len(p["flagged_beyond_floor"]) for p in pairs)}
    found = [grown_pair(args, *pair) for pair in grown]
    summary |= {"grown_pairs": len(found),
                "grown_detected": sum(g["detected"] for g in found),
                "grown_detected_alone": sum(g["detected_alone"] for g in found)}
    if found and "detected_alone_beyond_floor" in found[0]:
        summary["grown_detected_alone_beyond_floor"] = sum(g["detected_alone_beyond_floor"]
                                                           for g in found)
    summary |= explained(found, args.collector)
    print(json.dumps({**summary, "aa": pairs, "grown": found,
                      "seconds": round(time.time() - start)}))


if __name__ == "__main__":
    main()
