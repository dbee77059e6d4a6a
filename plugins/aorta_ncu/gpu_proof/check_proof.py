"""Checks the sweeps of run_gpu_proof.sh against what the collector promises; prints each result.

    python check_proof.py <work folder of run_gpu_proof.sh>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HARDWARE = ("sm_throughput", "dram_throughput", "achieved_occupancy", "tensor_pipe", "l2_hit_rate")


def records(work: Path, sweep: str) -> list[dict]:
    paths = sorted((work / sweep).glob("cells/*/trial_*/record.json"))
    return [json.loads(p.read_text()) for p in paths]


def main() -> int:
    work = Path(sys.argv[1])
    checks: dict[str, bool] = {}
    example = records(work, "examples")
    checks["example: 4 trials, all pass"] = len(example) == 4 and all(
        r["verdict"] == "pass" for r in example)
    for r in example:
        m, name = r["metrics"], f"example {r['axes'].get('payload')} trial {r['trial']}"
        checks[f"{name}: kernels, time and every hardware metric"] = (
            m.get("ncu_kernel_count", 0) > 0 and m.get("ncu_gpu_time_ms", 0) > 0
            and all(f"ncu_{k}_pct" in m and f"ncu_top_kernel_{k}_pct" in m for k in HARDWARE))
    for sweep in ("detailed", "sections", "filtered", "torchrun", "app_replay"):
        (r,) = records(work, sweep) or [{}]
        checks[f"{sweep}: pass with kernels"] = (r.get("verdict") == "pass"
                                                 and r["metrics"].get("ncu_kernel_count", 0) > 0)
    (r,) = records(work, "filtered") or [{"metrics": {}}]
    checks["filtered: one softmax launch"] = (r["metrics"].get("ncu_kernel_count") == 1
                                              and "softmax" in r["metrics"]["ncu_top_kernels"][0])
    (r,) = records(work, "no_kernels") or [{"warnings": {}}]
    checks["no_kernels: warned"] = any("no kernels were profiled" in w
                                       for w in r["warnings"].get("ncu", []))
    (r,) = records(work, "exit3") or [{}]
    checks["exit3: exit code 3 kept, kernels parsed"] = (
        r.get("exit_code") == 3 and r["metrics"].get("ncu_kernel_count", 0) > 0)
    (r,) = records(work, "missing_ncu") or [{}]
    checks["missing_ncu: setup error naming the option"] = (
        r.get("verdict") == "error" and "collector.ncu.ncu_bin" in (r.get("error") or ""))
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    failed = [n for n, ok in checks.items() if not ok]
    print("all checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
