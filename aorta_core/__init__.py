"""aorta core: the plugin host, the Hydra sweep engine, trial records and the results matrix.

Collector plugins import everything from :mod:`aorta_core.api`; the names below stay here for
plugins written before it. Workloads open the selected collectors' in-process sessions with
``aorta_core.payload.session`` (docs/plugins.md).
"""

from aorta_core import payload
from aorta_core.api import (
    Claim,
    CollectorInfo,
    Command,
    FileRefused,
    Launch,
    Mapped,
    OptionError,
    PayloadSession,
    ReportSection,
    SetupError,
    TimelineSource,
    TrialRun,
    check_regex,
    check_regular,
    check_text,
    decoded_bytes,
    find_executable,
    hookimpl,
    json_number,
    mapped_limited,
    open_limited,
    parallel_map,
    read_limit,
    read_limited,
    without_bom,
)

__version__ = "0.1.0"

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
