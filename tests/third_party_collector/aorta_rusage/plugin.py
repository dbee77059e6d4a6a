"""Hook implementations of the ``rusage`` collector."""

import dataclasses
import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from aorta_core.api import CollectorInfo, Launch, hookimpl

RESULT_NAME = "rusage.json"


@dataclass
class RusageOptions:
    max_rss: bool = True


@hookimpl
def aorta_collector():
    return CollectorInfo(
        description="CPU time and peak memory of the workload (getrusage of its children)",
        options=RusageOptions,
        config_package="aorta_rusage.conf",
        wrap_order=90,
    )


@hookimpl
def wrap_argv(launch: Launch, options: RusageOptions, artifact_dir: Path) -> Launch:
    argv = (sys.executable, "-m", "aorta_rusage.wrap", str(artifact_dir), "--", *launch.argv)
    return dataclasses.replace(launch, argv=argv)


@hookimpl
def collect_artifacts(artifact_dir: Path):
    return sorted(artifact_dir.glob("*.json"))


@hookimpl
def parse_metrics(artifact_dir: Path, options: RusageOptions):
    try:
        data = json.loads((artifact_dir / RESULT_NAME).read_text())
    except (OSError, ValueError) as exc:
        warnings.warn(f"{RESULT_NAME} unreadable ({exc}); no rusage metrics", stacklevel=1)
        return {}
    metrics = {"rusage_user_cpu_s": data["ru_utime"], "rusage_system_cpu_s": data["ru_stime"]}
    if options.max_rss:
        metrics["rusage_max_rss_bytes"] = data["ru_maxrss"] * 1024
    return metrics
