"""Proton's ``data=trace`` files on the trial's merged timeline (``timeline_sources``).

Proton 3.6/3.7 counts a trace's times from its first kernel, with no absolute anchor: the
session's clock marks (:mod:`aorta_proton.clock_marks`) tie it to the wall clock, and the core
places it by them. Without marks (a process that never used the GPU through torch) the core
centres it in the span it must lie in: in env mode the payload starts Proton before the
benchmark's first iteration and stops it after the last, with no GPU work in between outside
them: the iterations are that span. In cli mode Proton wraps the whole run.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from aorta_core.api import TimelineSource
from aorta_proton.clock_marks import read_marks
from aorta_proton.options import ProtonOptions
from aorta_proton.wrap import attached_mode


def sources(artifact_dir: Path, options: ProtonOptions) -> list[TimelineSource]:
    """Every chrome trace Proton wrote; its rank is the ``rank<R>`` in its name, else 0 (the
    benchmark starts Proton on rank 0). Its tids are GPU streams. None: a warning says why,
    so that a timeline without a Proton lane is never silent."""
    span = "iterations" if attached_mode(options, artifact_dir) == "env" else "run"
    found = [TimelineSource(path, clock="relative", span=span, thread_name="stream {tid}",
                            marks=read_marks(path))
             for path in sorted(artifact_dir.glob("*.chrome_trace"))]
    if not found:
        warnings.warn(_no_lane(options), stacklevel=2)
    return found


def _no_lane(options: ProtonOptions) -> str:
    if options.data != "trace":
        return (f"no lane on the timeline: this trial recorded data={options.data} (kernel "
                "totals, no times); run it with collector.proton.data=trace (the same kernel "
                "metrics) for one")
    return ("no lane on the timeline: Proton wrote no .chrome_trace in this trial (see "
            "its stderr.log)")
