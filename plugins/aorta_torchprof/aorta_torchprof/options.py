"""The options of the torchprof collector: one dataclass, the Hydra schema and the defaults.

The same fields travel to the profiled process as JSON (``AORTA_TORCHPROF_OPTIONS``), so a
workload in env mode and the runner read one vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MODES = ("wrap", "env")
ACTIVITIES = ("cpu", "cuda")
STEP_ON = ("auto", "optimizer", "manual", "run")


@dataclass
class TorchprofOptions:
    """Options of ``collector=torchprof`` (see docs/collectors/torchprof.md)."""

    #: ``wrap``: rewrite ``python script.py`` / ``python -m mod`` / ``torchrun ...`` launches to
    #: run under the plugin's runner; ``env``: leave argv alone, hand the options and the output
    #: folder to a workload that drives torch.profiler itself.
    mode: str = "wrap"
    #: ``cpu``, ``cuda`` (also ROCm); empty: CPU plus CUDA when ``torch.cuda.is_available()``.
    activities: list[str] = field(default_factory=list)
    skip_first: int = 0
    wait: int = 1
    warmup: int = 1
    active: int = 3
    #: Number of wait/warmup/active cycles; 0 repeats until the run ends.
    repeat: int = 1
    #: What advances the schedule: every ``optimizer.step()`` (global hook), an explicit
    #: ``aorta_torchprof.session.step()`` call in the payload, ``run``: the whole run is one
    #: recorded window (schedule fields ignored), or ``auto``: the optimizer's steps when there
    #: are any, else the whole run (a script without an optimizer is measured too).
    step_on: str = "auto"
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    chrome_trace: bool = True
    gzip: bool = False
    #: Write the traces in the layout of TensorBoard's profiler plugin (``tensorboard/``).
    tensorboard: bool = False
    #: Also write ``key_averages().table()`` per rank as text.
    key_averages: bool = False
    #: Parse like HolisticTraceAnalysis's default: drop GPU work launched from the last
    #: ``ProfilerStep#`` on (and GPU work with no CPU launch) when a trace has two or more steps.
    drop_last_profiler_step: bool = False
