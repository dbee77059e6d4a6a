"""The collector hook contract (pluggy project ``"aorta"``).

This module is the reference: every hook a collector may implement, with its contract.
A collector is a module registered under the entry-point group ``aorta.collectors``; the
entry-point name is the collector's name everywhere (``collector=<name>``, the ``<name>_``
metric prefix, the ``<name>/`` artifact folder). The core calls each hook only on the
selected collectors, with keyword arguments, and isolates every error to that collector.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pluggy

from aorta_core.contracts import CollectorInfo, Launch, TrialRun

hookspec = pluggy.HookspecMarker("aorta")


@hookspec
def aorta_collector() -> CollectorInfo:
    """Describe the collector: description, options dataclass, config package, wrap order.

    Called once when the plugin is loaded; must be cheap (no profiler import, no subprocess).
    """


@hookspec
def check_options(options: Any, selected: Mapping[str, Any]) -> None:
    """Reject invalid option values or collector combinations by raising ``OptionError``.

    ``options`` is this collector's options dataclass instance; ``selected`` maps the name of
    every collector selected for the cell (this one included) to its options. Runs before any
    trial; types and unknown keys were already checked against the dataclass by Hydra.
    """


@hookspec
def wrap_argv(launch: Launch, options: Any, artifact_dir: Path) -> Launch:
    """Return the launch rewritten so that this collector measures it.

    ``artifact_dir`` exists and is empty; everything the profiler writes must land there.
    Raise ``SetupError`` with a one-line reason when the measurement cannot be taken (missing
    binary, a launch shape the profiler cannot wrap, options that would measure nothing):
    never return a launch that runs unmeasured.
    """


@hookspec
def collect_artifacts(artifact_dir: Path, options: Any, run: TrialRun) -> list[Path]:
    """After the run, gather what the profiler wrote into ``artifact_dir``; return the files.

    Called whatever the run's outcome (failed and timed-out runs keep their artifacts). A
    collector whose profiler writes straight into ``artifact_dir`` need not implement it: the
    core then lists every file in the folder.
    """


@hookspec
def parse_metrics(artifact_dir: Path, options: Any) -> dict[str, Any]:
    """Turn the artifacts into a flat dict of metrics, every key prefixed ``<name>_``.

    Fail-soft: a missing, partial or malformed artifact costs metrics (``warnings.warn`` with
    the reason), never an exception. A number that was not measured is omitted, never
    invented. Units live in the names (``_ms``, ``_us``, ``_bytes``). The core adds
    ``<name>_artifact_dir`` itself.
    """
