"""The collector hook contract (pluggy project ``"aorta"``), grouped by the phase that calls it.

This module is the reference: every hook a collector may implement, with its contract and an
example. A collector is a module registered under the entry-point group ``aorta.collectors``;
the entry-point name is the collector's name everywhere (``collector=<name>``, the ``<name>_``
metric prefix, the ``<name>/`` artifact folder). The core calls each hook on one collector at a
time, with keyword arguments (implement only the ones you need, with any subset of the
arguments), and isolates every error to that collector: one warning or a failed trial, never a
failed sweep. Only ``aorta_collector`` and ``wrap_argv`` are required.

Phases: **load** (``aorta_collector``, ``aorta_commands``) → **check**, before any trial
(``check_options``, ``resource_claims``, ``check_machine``) → **run**, each trial
(``wrap_argv``, then ``payload_session`` inside the workload) → **after the run**
(``collect_artifacts``, ``parse_metrics``, ``kernel_table``) → **reports** (``timeline_sources``,
``report_sections``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pluggy

from aorta_core.api.contracts import (
    Claim,
    CollectorInfo,
    Command,
    KernelRow,
    Launch,
    PayloadSession,
    ReportSection,
    TimelineSource,
    TrialRun,
)

hookspec = pluggy.HookspecMarker("aorta")


# -- load: once per process, when the collector's module is imported -------------------------


@hookspec
def aorta_collector() -> CollectorInfo:
    """Describe the collector: description, options dataclass, wrap order (required).

    Must be cheap (no profiler import, no subprocess)::

        @hookimpl
        def aorta_collector():
            return CollectorInfo(description="pyinstrument of every Python process",
                                 options=Options)
    """


@hookspec
def aorta_commands() -> Mapping[str, Command]:
    """Commands this collector adds to ``aorta``, by name (``aorta <name> ...``).

    A name of the core's own tools, or one another collector already took, is refused with a
    warning. ``main`` runs with the arguments after the name; what it returns is the exit
    status::

        @hookimpl
        def aorta_commands():
            return {"ncu-sections": Command("list ncu's section sets", main=list_sections)}
    """


# -- check: before any trial runs; a refusal stops the sweep with one line -------------------


@hookspec
def check_options(options: Any, selected: Mapping[str, Any]) -> None:
    """Reject invalid option values by raising ``OptionError`` (its one-line message is shown).

    ``options`` is this collector's options dataclass instance; ``selected`` maps the name of
    every collector selected for the cell (this one included) to its options. Types and unknown
    keys were already checked against the dataclass by Hydra. Combinations with other collectors
    are declared with ``resource_claims``, not refused here by name.
    """


@hookspec
def resource_claims(options: Any) -> Iterable[Claim]:
    """What this collector holds while it measures with ``options``, so that the core refuses a
    cell whose collectors cannot measure together (one of them claims a resource exclusively
    that another claims too), naming both and their reasons::

        @hookimpl
        def resource_claims(options):
            return [Claim("gpu-kernels", exclusive=True,
                          why="ncu serialises and replays every kernel")]
    """


@hookspec
def check_machine(options: Any) -> None:
    """Refuse a machine on which this collector cannot measure anything with ``options`` (no
    GPU, no driver its profiler needs) by raising ``SetupError`` with a one-line reason and fix.

    Called on the machine that runs the trials, before the first: by the sweep's pre-check when
    its cells run here (Hydra's basic and joblib launchers, submitit's local one), where a
    refusal stops the sweep in one line (exit status 2, nothing written), and by each cell where
    it runs (a Slurm node), where it refuses the cell. Must be cheap: no profiler import, no GPU
    context, no subprocess::

        @hookimpl
        def check_machine(options):
            if not glob.glob("/dev/nvidia[0-9]*"):
                raise SetupError("no NVIDIA GPU here; run on a machine with one")
    """


# -- run: each trial ----------------------------------------------------------------------------


@hookspec
def wrap_argv(launch: Launch, options: Any, artifact_dir: Path) -> Launch:
    """Return the launch rewritten so that this collector measures it (required).

    ``artifact_dir`` exists and is empty; everything the profiler writes must land there.
    Raise ``SetupError`` with a one-line reason when the measurement cannot be taken (missing
    binary, a launch shape the profiler cannot wrap, options that would measure nothing):
    never return a launch that runs unmeasured. A collector that measures from inside the
    workload (``payload_session``) returns the launch with its variables added to ``env``.
    """


@hookspec
def payload_session(rank: int, env: Mapping[str, str], context: Mapping[str, Any]
                    ) -> PayloadSession | None:
    """In the workload's own process (``aorta_core.payload.session``): a session that measures
    it from within, or ``None`` when this collector has nothing to do in this process.

    ``env`` is the process's environment: a collector whose ``wrap_argv`` selected it for this
    trial finds its variables there. ``context`` is what the workload says of itself (e.g.
    ``output_dir``); ignore keys you do not know. Import the profiler in ``start()``, not here::

        @hookimpl
        def payload_session(rank, env, context):
            if "AORTA_MYPROF_DIR" not in env:
                return None
            return MySession(Path(env["AORTA_MYPROF_DIR"]) / f"rank{rank}.json")
    """


# -- after the run: whatever its outcome ----------------------------------------------------------


@hookspec
def collect_artifacts(artifact_dir: Path, options: Any, run: TrialRun) -> list[Path]:
    """After the run, gather what the profiler wrote into ``artifact_dir``; return the files.

    Called whatever the run's outcome (failed and timed-out runs keep their artifacts). A
    collector whose profiler writes straight into ``artifact_dir`` need not implement it: the
    core then lists every file in the folder. Raise ``SetupError`` with a one-line reason when
    the artifacts show that nothing was measured because the profiler could not start (inside
    the workload, say): the trial is then an ``error`` with that reason, as when ``wrap_argv``
    refuses.
    """


@hookspec
def parse_metrics(artifact_dir: Path, options: Any) -> dict[str, Any]:
    """Turn the artifacts into a flat dict of metrics, every key prefixed ``<name>_``.

    Fail-soft: a missing, partial or malformed artifact costs metrics (``warnings.warn`` with
    the reason), never an exception. A number that was not measured is omitted, never
    invented. Units live in the names (``_ms``, ``_us``, ``_bytes``). The core adds
    ``<name>_artifact_dir`` itself.
    """


@hookspec
def kernel_table(artifact_dir: Path, options: Any) -> Iterable[KernelRow]:
    """The trial's kernels (or CPU ops) as rows: name, calls, total ms, per profiled step where
    the capture has steps (``step=None`` otherwise), for ``kernels.parquet`` beside the record,
    which ``aorta compare`` reads instead of the traces.

    Called right after ``parse_metrics``, in the same process, whatever the run's outcome (a
    failed trial's rows are kept too): a collector may keep what its parse read (module state)
    instead of reading a trace twice. Rows of one name and step are summed by the hook, not
    repeated. The core demangles names and adds the pairing key
    (:func:`aorta_core.api.kernel_names.kernel_key`). Fail-soft as ``parse_metrics``: return
    ``[]`` when there is nothing; a row that is not a :class:`KernelRow` of valid values, or an
    exception, costs this collector's table and one warning, never its metrics or the trial::

        @hookimpl
        def kernel_table(artifact_dir, options):
            totals = read_my_profile(artifact_dir)  # {name: (calls, total_ms)}
            return [KernelRow(name, calls, ms, kind="gpu_kernel")
                    for name, (calls, ms) in totals.items()]
    """


# -- reports: from the records, after the sweep or by ``aorta timeline`` / ``aorta report`` -------


@hookspec
def timeline_sources(artifact_dir: Path, options: Any) -> list[TimelineSource]:
    """The trace files of one trial that belong on its merged timeline, and how to place them.

    ``artifact_dir`` is the trial's ``<name>/`` folder; ``options`` the options it ran with (from
    its record). Called only when the trial ran this collector, whenever a timeline is written
    (``timeline=true``, ``aorta timeline``). Return ``[]`` when there is nothing to place; an
    exception or anything but a list of ``TimelineSource`` costs this collector's lanes and one
    warning, never the timeline::

        @hookimpl
        def timeline_sources(artifact_dir, options):
            return [TimelineSource(p, clock="unix", error_bound_ms=0.005)
                    for p in sorted(artifact_dir.glob("*.pt.trace.json"))]
    """


@hookspec
def report_sections(matrix: Mapping[str, Any], output_dir: Path) -> list[ReportSection]:
    """Sections of the sweep's report.html and perf.md from this collector's results.

    ``matrix`` is the sweep's ``matrix.json`` content (cells, their parameters and metric
    summaries); ``output_dir`` the sweep's folder (read its records and artifacts from there,
    with the bounded readers of ``aorta_core.api``). Called only when the sweep ran this
    collector; return ``[]`` when there is nothing to say.
    """
