"""aorta collector: pyinstrument samples every Python process of the workload, one file a rank."""
import dataclasses
import json
import os
import sys
import warnings
from collections import Counter

from aorta_core import api  # everything a plugin imports from aorta


@dataclasses.dataclass
class Options:
    interval_ms: float = 1.0  # between two samples
    top: int = 5  # functions named in pyinstrument_top_functions


@api.hookimpl
def aorta_collector():
    return api.CollectorInfo(description="pyinstrument of each Python process", options=Options)


@api.hookimpl
def wrap_argv(launch, options, artifact_dir):
    if (python := api.split_python(launch.argv)) is None or python.kind not in ("script", "module"):
        raise api.SetupError("pyinstrument runs `python script.py` or `-m module` (torchrun "
                             "too); put other commands in a script")
    runner = ("-m", "aorta_pyinstrument", str(artifact_dir), str(options.interval_ms / 1e3))
    return dataclasses.replace(launch, argv=python.rebuild(*runner))


@api.hookimpl
def parse_metrics(artifact_dir, options):
    if not (paths := sorted(artifact_dir.glob("rank*.pyisession"))):  # Session.save JSON
        warnings.warn(f"no rank*.pyisession in {artifact_dir}; see the trial stderr", stacklevel=2)
        return {}  # fail soft: a missing artifact costs metrics, never an exception
    sessions = [json.loads(api.read_limited(path, root=artifact_dir)) for path in paths]
    self_s = Counter()  # a frame is "function\0file\0first line", then "\1" and attributes
    for stack, seconds in (record for s in sessions for record in s["frame_records"]):
        function, path, line = stack[-1].split("\x01")[0].split("\x00")
        self_s[f"{function} ({os.path.basename(path)}:{line})"] += seconds
    return {"pyinstrument_process_count": len(sessions),
            "pyinstrument_duration_ms": max(s["duration"] for s in sessions) * 1e3,
            "pyinstrument_cpu_ms": sum(s["cpu_time"] for s in sessions) * 1e3,
            "pyinstrument_top_functions": [f for f, _ in self_s.most_common(options.top)]}


def main(out_dir, interval_s, *target):  # in every process of the workload: one file a rank
    from pyinstrument import Profiler  # here: aorta's own process never imports it
    profiler = Profiler(interval=float(interval_s), async_mode="disabled")  # thread stacks only
    run_main = api.run_main  # loaded on first use: before the profile, which is the workload's
    profiler.start()
    try:
        run_main(target)
        return 0
    except SystemExit as exc:  # the payload's own sys.exit: its status, once the file is saved
        return api.exit_status(exc)
    finally:
        profiler.stop().save(os.path.join(out_dir, f"rank{api.rank_from_env()}.pyisession"))


if __name__ == "__main__":
    api.exit_without_teardown(main(*sys.argv[1:]))  # no C++ teardown: see docs/plugins.md
