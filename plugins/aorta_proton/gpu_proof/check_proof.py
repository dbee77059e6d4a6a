"""Check what ``run_gpu_proof.sh`` produced: the metrics each sweep must have, the pitfalls fixed.

    python check_proof.py <work dir of run_gpu_proof.sh, or the unpacked proton_proof.tar.gz>

Prints one line per check and the metric means (for the docs); exits 1 if any check failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KERNEL = ("proton_kernel_count", "proton_gpu_time_ms", "proton_top_kernel_ms")
SCOPES = (
    "proton_scope_cycles",
    "proton_top_scope_cycles",
    "proton_scope_compute_share",
    "proton_scope_load_share",
)
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def cell(root: Path, sweep: str) -> dict:
    matrix = json.loads((root / sweep / "matrix.json").read_text())
    return matrix["cells"][0]


def records(root: Path, sweep: str) -> list[dict]:
    paths = sorted((root / sweep).glob("cells/*/trial_*/record.json"))
    return [json.loads(p.read_text()) for p in paths]


def summary_has(root: Path, sweep: str, metrics: tuple[str, ...], trials: int) -> None:
    try:
        found = cell(root, sweep)
    except (OSError, KeyError, IndexError, ValueError) as exc:
        check(False, f"{sweep}: matrix.json readable ({exc})")
        return
    summary = found.get("metrics_summary", {})
    check(
        found["trials"]["pass"] == trials, f"{sweep}: {trials} passing trials ({found['trials']})"
    )
    for metric in metrics:
        stats = summary.get(metric)
        check(
            bool(stats) and stats["n"] == trials and stats["mean"] > 0,
            f"{sweep}: {metric} = {stats and round(stats['mean'], 6)} over {trials} trials",
        )
    print(f"     {sweep} text metrics: {found.get('metrics_text')}")


def main(root: Path) -> int:
    summary_has(root, "cupti_auto", KERNEL, 3)
    summary_has(root, "instrumentation", SCOPES, 2)
    summary_has(root, "env_mode", KERNEL, 2)
    summary_has(root, "env_loop", KERNEL, 2)
    summary_has(root, "env_benchmark", (*KERNEL, "workload_step_time_ms"), 2)
    for sweep in ("env_loop", "env_benchmark"):
        logs = [p.read_text(errors="replace") for p in (root / sweep).glob("cells/*/*/stderr.log")]
        check(
            len(logs) == 2 and not any("session failed" in log for log in logs),
            f"{sweep}: Proton's payload session started in both trials (no 'session failed')",
        )
    summary_has(root, "trace", KERNEL, 1)
    summary_has(root, "python_context_hook", KERNEL, 1)

    (pc,) = records(root, "cupti_pcsampling") or [{}]
    print(
        f"     cupti_pcsampling: verdict={pc.get('verdict')} error={pc.get('error')} "
        f"metrics={pc.get('metrics')} warnings={pc.get('warnings')}"
    )
    check(bool(pc), "cupti_pcsampling: a record was written (outcome reported above)")

    (exit0,) = records(root, "system_exit") or [{}]
    check(
        exit0.get("verdict") == "pass" and "proton_gpu_time_ms" in exit0.get("metrics", {}),
        "system_exit: raise SystemExit(0) still yields a profile and a passing trial",
    )

    (failing,) = records(root, "pytest_failing") or [{}]
    check(
        failing.get("verdict") == "fail" and failing.get("exit_code") == 1,
        f"pytest_failing: failing pytest is a failing trial (exit {failing.get('exit_code')})",
    )
    check(
        "proton_gpu_time_ms" in failing.get("metrics", {}),
        "pytest_failing: the profile is still written",
    )

    (idle,) = records(root, "no_kernel") or [{}]
    warned = any("no GPU work seen" in w for w in idle.get("warnings", {}).get("proton", []))
    check(
        idle.get("verdict") == "pass"
        and warned
        and "proton_gpu_time_ms" not in idle.get("metrics", {}),
        "no_kernel: passes, warns 'no GPU work seen', publishes no GPU time",
    )
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
