"""aorta core: the plugin host, the Hydra sweep engine, trial records and the results matrix.

Collector plugins import what they need from here: ``hookimpl`` to mark hook implementations,
the contract types, ``find_executable`` to locate the profiler a collector wraps,
``check_regex`` / ``check_text`` for regular-expression and text options, bounded reads of
artifacts, JSON-safe numbers and ``parallel_map`` to parse many files in worker processes;
``aorta_core.launch`` splits and rebuilds Python launches. Workloads open the selected
collectors' in-process sessions with ``aorta_core.payload.session`` (docs/plugins.md).
"""

import pluggy

from aorta_core import payload
from aorta_core.bom import without_bom
from aorta_core.checks import check_regex, check_text
from aorta_core.contracts import (
    Claim,
    CollectorInfo,
    Command,
    Launch,
    OptionError,
    PayloadSession,
    ReportSection,
    SetupError,
    TimelineSource,
    TrialRun,
)
from aorta_core.executables import find_executable
from aorta_core.files import (
    FileRefused,
    check_regular,
    mapped_limited,
    open_limited,
    read_limit,
    read_limited,
)
from aorta_core.numbers import json_number
from aorta_core.parallel import Mapped, decoded_bytes, parallel_map

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("aorta")

__all__ = [
    "Claim",
    "CollectorInfo",
    "Command",
    "FileRefused",
    "Launch",
    "Mapped",
    "OptionError",
    "PayloadSession",
    "ReportSection",
    "SetupError",
    "TimelineSource",
    "TrialRun",
    "__version__",
    "check_regex",
    "check_regular",
    "check_text",
    "decoded_bytes",
    "find_executable",
    "hookimpl",
    "json_number",
    "mapped_limited",
    "open_limited",
    "parallel_map",
    "payload",
    "read_limit",
    "read_limited",
    "without_bom",
]
