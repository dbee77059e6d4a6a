# aorta_cprofile/plugin.py
import cProfile
import dataclasses
import os
import pstats
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from aorta_core import CollectorInfo, SetupError, hookimpl
from aorta_core.launch import run_main, split_python


@dataclass
class Options:
    top: int = 5  # functions named in cprofile_top_functions


@hookimpl
def aorta_collector():
    return CollectorInfo(description="cProfile of every Python process", options=Options,
                         config_package="aorta_cprofile.conf", wrap_order=40)


@hookimpl
def wrap_argv(launch, options, artifact_dir):
    python = split_python(launch.argv)
    if python is None or python.kind not in ("script", "module"):
        raise SetupError("cprofile runs `python script.py`, `python -m module` and torchrun "
                         "launches of them; put other commands in a script")
    runner = ("-m", "aorta_cprofile.plugin", str(artifact_dir))
    return dataclasses.replace(launch, argv=python.rebuild(*runner))


@hookimpl
def parse_metrics(artifact_dir, options):
    files = sorted(artifact_dir.glob("rank*.prof"))
    if not files:
        warnings.warn(f"no rank*.prof in {artifact_dir}: see the trial's stderr", stacklevel=2)
        return {}
    stats = pstats.Stats(*map(str, files))
    # stats.stats: (file, line, function) -> (calls, primitive calls, self s, cumulative s, ...)
    hottest = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)
    return {
        "cprofile_process_count": len(files),
        "cprofile_calls": stats.total_calls,
        "cprofile_self_ms": stats.total_tt * 1e3,
        "cprofile_top_functions": [f"{name} ({os.path.basename(path)}:{line})"
                                   for (path, line, name), _ in hottest[: options.top]],
    }


def main(out_dir, *target):
    """In every process of the workload: run the target under cProfile, one file per rank."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run_main(target)
    finally:
        profile.disable()
        profile.dump_stats(Path(out_dir) / f"rank{os.environ.get('RANK', '0')}.prof")


if __name__ == "__main__":
    main(*sys.argv[1:])
