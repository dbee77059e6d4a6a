"""aorta core: the plugin host, the Hydra sweep engine, trial records and the results matrix.

Collector plugins import what they need from here: ``hookimpl`` to mark hook implementations,
the contract types, ``find_executable`` to locate the profiler a collector wraps and
``check_regex`` for regular-expression options; ``aorta_core.launch`` splits and rebuilds Python
launches. Workloads open the selected collectors' in-process sessions with
``aorta_core.payload.session``.
"""

import pluggy

from aorta_core import payload
from aorta_core.checks import check_regex
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
    "check_regex",
    "find_executable",
    "hookimpl",
    "payload",
]
