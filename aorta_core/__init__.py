"""aorta core: the plugin host, the Hydra sweep engine, trial records and the results matrix.

Collector plugins import what they need from here: ``hookimpl`` to mark hook implementations,
the contract types, and ``find_executable`` to locate the profiler a collector wraps.
"""

import pluggy

from aorta_core.contracts import CollectorInfo, Launch, OptionError, SetupError, TrialRun
from aorta_core.executables import find_executable

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("aorta")

__all__ = [
    "CollectorInfo",
    "Launch",
    "OptionError",
    "SetupError",
    "TrialRun",
    "__version__",
    "find_executable",
    "hookimpl",
]
