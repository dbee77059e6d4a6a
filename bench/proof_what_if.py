"""Proof of ``aorta diagnose``'s what-if (issue 43) on gloo CPU ranks: the benchmark (DDP, the
tiny model, profiled steps 2-7) with one rank slowed by 100 ms per step in each way the
benchmark injects, and the same run without the injection, ``--repeats`` times each; per run the
step time the what-if predicts without the straggler against the clean run's measured step
(the clean run of the same repeat), and what a clean run claims recoverable.

Prints one JSON line: per case and repeat (predicted, truth, error %, within max(20 %, 2 ms));
the same against the median clean step of all repeats of that rank count (``within_median``:
one clean run's step moved by a third between repeats on the 2-core VM); and per clean run the
largest ``per_op_type`` saving as % of its step.

    python bench/proof_what_if.py --out runs/what_if [--repeats 3] [--ranks 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
BENCH = ["device=cpu", "parallel=ddp", "training.max_steps=8", "data.batch_size=2",
         "data.sequence_length=4", "profiling.enabled=true", "profiling.wait=0",
         "profiling.warmup=2", "profiling.active=6", "telemetry.matmul_reference=false"]
CASES = {
    "host-sleep": ["inject.host_ms=100"],
    "host-burn": ["inject.host_ms=100", "inject.host_mode=burn"],
    "data": ["inject.data_ms=100"],
    "compute": ["inject.compute_ms=100"],
    "collective": ["inject.collective_ms=100"],
}


def diagnosed(trial: Path, nproc: int, *overrides: str) -> dict:
    if not (trial / "diagnosis.json").is_file():
        env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
        env |= {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
        subprocess.run([TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m",
                        "aorta_core.benchmark", *BENCH, f"output_dir={trial / 'benchmark'}",
                        *overrides], env=env, check=True, capture_output=True, timeout=600)
        subprocess.run([sys.executable, "-m", "aorta_core", "diagnose", str(trial)],
                       check=True, capture_output=True, timeout=600)
    return json.loads((trial / "diagnosis.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    start, runs, clean_claims = time.time(), [], []
    for nproc in args.ranks:
        slowed = str(nproc - 1)
        for repeat in range(args.repeats):
            where = args.out / f"r{nproc}" / f"{repeat}"
            clean = diagnosed(where / "clean", nproc)
            truth = clean["what_if"]["step_ms"]
            claim = max(v["recoverable_ms"] for v in clean["what_if"]["per_op_type"].values())
            clean_claims.append({"ranks": nproc, "repeat": repeat, "step_ms": truth,
                                 "stragglers": [s["rank"] for s in clean["stragglers"]],
                                 "largest_saving_pct": round(100 * claim / truth, 1)})
            for case, overrides in CASES.items():
                found = diagnosed(where / case, nproc, f"inject.rank={slowed}", *overrides)
                predicted = found["what_if"]["step_ms_without_stragglers"]
                runs.append({
                    "ranks": nproc, "repeat": repeat, "case": case,
                    "stragglers": [s["rank"] for s in found["stragglers"]],
                    "measured_ms": found["what_if"]["step_ms"],
                    "replayed_ms": found["what_if"]["replayed_step_ms"],
                    "predicted_ms": predicted, "truth_ms": truth,
                    "error_pct": round(100 * (predicted - truth) / truth, 1),
                    "within": abs(predicted - truth) <= max(0.2 * truth, 2.0)})
    for run in runs:  # also against the clean step of every repeat of that rank count
        typical = statistics.median(c["step_ms"] for c in clean_claims
                                    if c["ranks"] == run["ranks"])
        run["truth_median_ms"] = typical
        run["within_median"] = abs(run["predicted_ms"] - typical) <= max(0.2 * typical, 2.0)
    print(json.dumps({"proof": "what_if", "runs": runs, "clean": clean_claims,
                      "within": sum(r["within"] for r in runs), "of": len(runs),
                      "within_median": sum(r["within_median"] for r in runs),
                      "clean_under_10pct": sum(c["largest_saving_pct"] < 10 for c in clean_claims),
                      "seconds": round(time.time() - start)}))


if __name__ == "__main__":
    main()
