"""Benchmark: trials per second of a trivial command with 1 and 2 parallel joblib workers.

Runs the real CLI twice on the same sweep shape (8 cells x N trials of ``python -c pass``) and
reports two ratios: end to end (whole command, Hydra and worker start-up included) and steady
state (trials per second between the first trial's start and the last record, from the records'
own timestamps). Target (issue 7): the 2-worker speed-up >= 1.6x on a 2-core machine.

    python bench/bench_scaling.py [--trials N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def sweep(workers: int, trials: int, out: Path) -> dict:
    argv = [sys.executable, "-m", "aorta_core", "-m", "sweep=repeat", f"trials={trials}",
            "hydra/launcher=joblib", f"hydra.launcher.n_jobs={workers}",
            "+cell=" + ",".join(str(i) for i in range(8)), f"output={out}", "--",
            sys.executable, "-c", "pass"]
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    wall = time.perf_counter() - start
    recs = [json.loads(p.read_bytes()) for p in out.glob("cells/*/trial_*/record.json")]
    window = max(r["recorded_at_unix"] for r in recs) - min(r["started_at_unix"] for r in recs)
    return {"trials": len(recs), "wall_s": wall, "trials_per_s": len(recs) / wall,
            "steady_trials_per_s": len(recs) / window}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40, help="trials per cell (8 cells)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = sweep(1, args.trials, Path(tmp) / "one")
        two = sweep(2, args.trials, Path(tmp) / "two")
    result = {
        "bench": "scaling", "one_worker": one, "two_workers": two,
        "speedup_end_to_end": two["trials_per_s"] / one["trials_per_s"],
        "speedup_steady": two["steady_trials_per_s"] / one["steady_trials_per_s"],
        "target": 1.6,
    }
    result["ok"] = result["speedup_steady"] >= 1.6
    for key, value in result.items():
        print(f"{key:20s} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
