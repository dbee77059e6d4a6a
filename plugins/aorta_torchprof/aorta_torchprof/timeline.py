"""torchprof's traces on the trial's merged timeline (``timeline_sources``).

Kineto writes ``baseTimeNanoseconds + ts × 1000`` as Unix time, for its CPU and GPU events alike
(it maps CUPTI's and roctracer's clocks onto it), so every trace is placed as it is.
"""

from __future__ import annotations

from pathlib import Path

from aorta_core.api import TimelineSource
from aorta_torchprof.parse import trace_files

#: Kineto's CPU clock vs ``time.time_ns()`` on one host: within [-2.1, +3.2] µs over 2000
#: ``record_function`` ranges (torch 2.13 CPU; docs/reports.md "Merged timeline").
KINETO_BOUND_MS = 0.005


def sources(artifact_dir: Path) -> list[TimelineSource]:
    """Every Kineto trace of the trial; its rank comes from the file (``distributedInfo``)."""
    return [TimelineSource(path, clock="unix", error_bound_ms=KINETO_BOUND_MS)
            for path in trace_files(artifact_dir)]
