"""Cost of running every collector hook call in a child process of its own (issue 40).

1. One call of :func:`aorta_core.engine.isolation.call_hook` returning a 200-metric answer, in a
   process that loaded what a sweep loads (Hydra, every installed collector): the median and
   90th percentile of ``--calls`` calls (fork, answer, exit); the hook itself costs nothing.
2. A sweep of ``--trials`` trials of ``true`` under a minimal collector (``wrap_argv``,
   ``collect_artifacts``, ``parse_metrics``: three calls a trial) against the same sweep without
   it, runs interleaved, medians of ``--repeat``: what the collector's hooks add to a trial.
   With ``--before DIR`` (``git archive <commit> aorta_core | tar -x -C DIR``) the tree there is
   timed too, interleaved, with ``PYTHONPATH=DIR``.

    python bench/bench_hook_call.py [--calls 300] [--trials 20] [--repeat 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = '''
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="costs nothing", options=Options)

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    return {f"nil_m{i}": float(i) for i in range(200)}
'''


def _install(site: Path) -> None:
    """The collector ``nil`` as a distribution on ``site`` (a PYTHONPATH entry)."""
    (site / "aorta_bench_nil").mkdir(parents=True)
    (site / "aorta_bench_nil" / "__init__.py").write_text("")
    (site / "aorta_bench_nil" / "plugin.py").write_text(PLUGIN)
    dist = site / "aorta_bench_nil-1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: aorta-bench-nil\nVersion: 1\n")
    (dist / "entry_points.txt").write_text("[aorta.collectors]\nnil = aorta_bench_nil.plugin\n")


def per_call(calls: int) -> dict[str, float]:
    import hydra  # noqa: F401  (what a sweep's process holds when it calls hooks)

    from aorta_core.engine.isolation import call_hook
    from aorta_core.engine.plugins import load_registry

    load_registry()
    answer = {f"nil_m{i}": float(i) for i in range(200)}
    for _ in range(20):
        call_hook(lambda: answer)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call_hook(lambda: answer)
        times.append(time.perf_counter() - start)
    times.sort()
    return {"call_median_ms": round(statistics.median(times) * 1e3, 2),
            "call_p90_ms": round(times[int(len(times) * 0.9)] * 1e3, 2)}


def _sweep_s(out: Path, collector: list[str], trials: int, env: dict[str, str]) -> float:
    subprocess.run(["rm", "-rf", str(out)], check=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aorta_core", "sweep=repeat", f"trials={trials}",
                    *collector, f"output={out}", "--", "true"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def per_trial(trials: int, repeat: int, before: Path | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        _install(site)
        env = {**os.environ, "AORTA_REPORT_PNG": "0", "AORTA_LOAD_PLUGINS": "nil",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(site),
                                                           os.environ.get("PYTHONPATH")]))}
        trees = {"": env}
        if before is not None:
            trees["_before"] = {**env, "PYTHONPATH": f"{before}{os.pathsep}{env['PYTHONPATH']}"}
        runs = {f"{kind}{tree}": [] for tree in trees for kind in ("bare", "nil")}
        for _ in range(repeat):
            for tree, tree_env in trees.items():
                for kind, collector in (("bare", []), ("nil", ["collector=nil"])):
                    runs[f"{kind}{tree}"].append(
                        _sweep_s(Path(tmp) / "out", collector, trials, tree_env))
    median = {name: statistics.median(values) for name, values in runs.items()}
    summary = {f"sweep_{name}_s": round(value, 3) for name, value in median.items()}
    for tree in trees:
        summary[f"per_trial_added_ms{tree}"] = round(
            (median[f"nil{tree}"] - median[f"bare{tree}"]) / trials * 1e3, 1)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an older aorta_core tree, timed too")
    args = parser.parse_args()
    summary = {"bench": "hook_call", "cores": len(os.sched_getaffinity(0)),
               **per_call(args.calls), **per_trial(args.trials, args.repeat, args.before)}
    for key, value in summary.items():
        print(f"{key:28s} {value}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
