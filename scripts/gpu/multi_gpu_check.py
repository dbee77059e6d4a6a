"""Summarise and check the multi-GPU proof (issue 8) from the sweeps multi_gpu_proof.sh ran.

    python scripts/gpu/multi_gpu_check.py <work dir> <ranks>

Prints one JSON object: per world size step time, throughput and overlap ratio from the
benchmark's own telemetry; per-rank trace counts; torchprof's HTA-style overlap ratio against the
benchmark's ``comm_hidden_ratio`` (same definition: compute-while-communicating / communicating);
Proton's metrics on rank 0. Exits 1 when a check fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def cell(work: Path, name: str) -> dict:
    (only,) = json.loads((work / name / "matrix.json").read_text())["cells"]
    return only


def median(c: dict, metric: str) -> float | None:
    return (c["metrics_summary"].get(metric) or {}).get("median")


def main() -> int:
    work, ranks = Path(sys.argv[1]), int(sys.argv[2])
    checks: dict[str, bool] = {}
    scaling = {}
    for folder in sorted(work.glob("world_*"), key=lambda p: int(p.name.split("_")[1])):
        c = cell(work, folder.name)
        scaling[folder.name] = {k: median(c, f"workload_{k}") for k in (
            "step_time_ms", "samples_per_s", "tflops", "overlap_ratio", "comm_hidden_ratio",
            "compute_comm_ms", "world_size")}
        checks[f"{folder.name} passed"] = c["trials"]["pass"] == c["trials"]["total"] > 0
    tp = cell(work, "torchprof")
    traces = [len(list(p.parent.rglob("*.pt.trace.json*")))
              for p in (work / "torchprof").glob("cells/*/trial_*/record.json")]
    checks["one trace per rank"] = bool(traces) and all(n == ranks for n in traces)
    ours, theirs = median(tp, "torchprof_overlap_ratio"), median(tp, "workload_comm_hidden_ratio")
    agree = None
    if ours is not None and theirs:
        agree = abs(ours - theirs) / theirs
        checks["overlap within 10 %"] = agree <= 0.10
    else:
        checks["overlap measured by both"] = False
    pr = cell(work, "proton")
    checks["proton on rank 0"] = median(pr, "proton_gpu_time_ms") is not None
    summary = {
        "ranks": ranks, "scaling": scaling, "traces_per_trial": traces,
        "torchprof_overlap_ratio": ours, "workload_comm_hidden_ratio": theirs,
        "relative_gap": agree, "proton_gpu_time_ms": median(pr, "proton_gpu_time_ms"),
        "proton_kernel_count": median(pr, "proton_kernel_count"), "checks": checks,
    }
    print(json.dumps(summary, indent=2))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
