"""What a collector plugin imports from aorta: the whole surface, in one module.

The built-in collectors import only from here, as a plugin outside the repository would;
everything else in ``aorta_core`` may change between releases. The hooks themselves are
specified in :mod:`aorta_core.api.hookspecs`; docs/plugins.md explains each name below.

- contract types: :class:`CollectorInfo`, :class:`Launch`, :class:`TrialRun`, :class:`Claim`,
  :class:`TimelineSource`, :class:`ReportSection`, :class:`Command`, :class:`PayloadSession`,
  :class:`KernelRow` (its kinds: ``KERNEL_KINDS``);
  errors :class:`SetupError`, :class:`OptionError`; ``hookimpl`` marks an implementation;
- option checks: ``check_regex``, ``check_text``; the profiler binary: ``find_executable``;
- bounded reads of artifacts: ``read_limited``, ``open_limited``, ``mapped_limited``,
  ``check_regular``, ``read_limit``, ``FileRefused``, ``without_bom``; the files of an artifact
  folder at any depth: ``files_under``; JSON-safe numbers:
  ``json_number``; worker processes: ``parallel_map``, ``Mapped``, ``decoded_bytes``; a big
  chrome trace decoded piece by piece, keeping what a reader needs: ``decode_pieces``; a JSON
  file of one document or several, one per line (Proton's chrome traces): ``decode_documents``;
- Python launches: ``split_python``, ``PythonLaunch``, ``interpreter``, ``run_main``,
  ``exit_status``, ``exit_without_teardown``;
- ranks: ``rank_from_env`` (a launcher's variables), ``rank_from_name`` (``rank<N>`` in a path),
  ``rank_in_head`` (Kineto's ``distributedInfo.rank`` from a trace's first 64 KiB);
- intervals: ``merge``, ``covered`` (numpy columns), ``merged``, ``total_length`` ((start, end)
  pairs, no numpy), ``union_length``; install hints: ``pip_install``;
- kernel names: ``demangle`` (Itanium names, by cxxfilt), ``signature``, ``kernel_key`` (one key
  per kernel whichever profiler printed it; template arguments and tile shapes collapsible).

Launches, intervals, trace pieces, install hints and kernel names load on first use, so that
importing a plugin stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from aorta_core.api.bom import without_bom
from aorta_core.api.checks import check_regex, check_text
from aorta_core.api.contracts import (
    KERNEL_KINDS,
    Claim,
    CollectorInfo,
    Command,
    KernelRow,
    Launch,
    OptionError,
    PayloadSession,
    ReportSection,
    SetupError,
    TimelineSource,
    TrialRun,
    hookimpl,
)
from aorta_core.api.executables import find_executable
from aorta_core.api.files import (
    FileRefused,
    check_regular,
    files_under,
    mapped_limited,
    open_limited,
    read_limit,
    read_limited,
)
from aorta_core.api.numbers import json_number
from aorta_core.api.parallel import Mapped, decoded_bytes, parallel_map
from aorta_core.api.ranks import rank_from_env, rank_from_name, rank_in_head

#: Names loaded on first use, by the module that defines them.
_LAZY = {
    "PythonLaunch": "aorta_core.api.launch", "interpreter": "aorta_core.api.launch",
    "run_main": "aorta_core.api.launch", "split_python": "aorta_core.api.launch",
    "exit_without_teardown": "aorta_core.api.launch", "exit_status": "aorta_core.api.launch",
    "covered": "aorta_core.api.intervals", "merge": "aorta_core.api.intervals",
    "merged": "aorta_core.api.intervals", "total_length": "aorta_core.api.intervals",
    "union_length": "aorta_core.api.intervals",
    "pip_install": "aorta_core.api.install_hints",
    "decode_pieces": "aorta_core.api.trace_pieces",
    "decode_documents": "aorta_core.api.json_lines",
    "demangle": "aorta_core.api.kernel_names", "kernel_key": "aorta_core.api.kernel_names",
    "signature": "aorta_core.api.kernel_names",
}

__all__ = [
    "KERNEL_KINDS", "Claim", "CollectorInfo", "Command", "FileRefused", "KernelRow", "Launch",
    "Mapped", "OptionError",
    "PayloadSession", "ReportSection", "SetupError", "TimelineSource", "TrialRun",
    "check_regex", "check_regular", "check_text", "decoded_bytes", "files_under",
    "find_executable",
    "hookimpl", "json_number", "mapped_limited", "open_limited", "parallel_map", "read_limit",
    "rank_from_env", "rank_from_name", "rank_in_head", "read_limited", "without_bom", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
