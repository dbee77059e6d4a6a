"""One trial: fresh artifact folders, wrap, run, collect, parse, prune, record.

Every failure mode ends in a record: a collector that cannot attach (or whose profiler, its
artifacts show, could not start in the run) makes the trial a setup error, a collector that fails
after the run only loses its metrics, and the record is written atomically last, so a crash at
any point leaves either no record (the trial re-runs) or a complete one.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.contracts import Launch, SetupError, TrialRun, launch_problem
from aorta_core.api.files import files_under, remove
from aorta_core.api.oneline import exception_line, named_once
from aorta_core.engine import environment
from aorta_core.engine.attempts import start_attempt
from aorta_core.engine.cells import Cell
from aorta_core.engine.failure import describe
from aorta_core.engine.isolation import call_hook
from aorta_core.engine.kernel_tables import KERNELS_NAME, KernelTables
from aorta_core.engine.metrics import Notes, collector_metrics, safe_text, workload_metrics
from aorta_core.engine.plugins import Registry
from aorta_core.engine.process import ProcessOutcome, WatchdogError, run_launch
from aorta_core.engine.records import (
    RECORD_NAME,
    AutoRecord,
    CollectorRecord,
    Retention,
    TrialRecord,
    write_record,
)
from aorta_core.engine.retention import prune
from aorta_core.engine.swaps import TrialFolders, make_real

STDOUT_NAME = "stdout.log"
STDERR_NAME = "stderr.log"
WORKLOAD_METRICS_NAME = "workload_metrics.json"


def _prepare(trial_dir: Path, collectors: list[str]) -> dict[str, Path]:
    """Fresh, empty artifact folders and no logs or metrics left from an earlier attempt."""
    if trial_dir.is_symlink():
        trial_dir.unlink()
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name in (STDOUT_NAME, STDERR_NAME, WORKLOAD_METRICS_NAME, KERNELS_NAME, *collectors):
        # what an earlier attempt (or anyone) left: a link is removed, never followed, and a
        # read-only folder a payload left is made writable first (files.remove)
        remove(trial_dir / name, trial_dir)
    folders = {name: trial_dir / name for name in collectors}
    for folder in folders.values():
        folder.mkdir()
    return folders


def _base_launch(cell: Cell, trial_dir: Path, index: int) -> Launch:
    env = dict(os.environ)
    env.update(cell.env)
    env.update(
        {
            "AORTA_TRIAL_DIR": str(trial_dir),
            "AORTA_METRICS_PATH": str(trial_dir / WORKLOAD_METRICS_NAME),
            "AORTA_CELL": cell.name,
            "AORTA_TRIAL": str(index),
        }
    )
    return Launch(argv=cell.command, env=env, cwd=Path.cwd())


def _wrap(registry: Registry, cell: Cell, order: list[str], folders: dict[str, Path],
          launch: Launch) -> tuple[Launch, str | None]:
    """Each collector wraps the launch, innermost first; the first failure is a setup error."""
    for name in reversed(order):  # so the first in ``order`` ends outermost
        outcome = call_hook(lambda n=name, la=launch: _plain_launch(registry.call(
            n, "wrap_argv", launch=la, options=cell.collectors[n], artifact_dir=folders[n])),
            cell.hook_timeout_s)
        if isinstance(outcome.error, SetupError):
            return launch, named_once(
                name, exception_line(outcome.error).removeprefix("SetupError: "))
        if outcome.failure is not None:
            what = "wrap_argv " if outcome.error is None else ""  # a timeout names the hook
            return launch, f"{name}: {what}{outcome.failure}"
        if isinstance(outcome.value, str):
            return launch, f"{name}: wrap_argv returned {outcome.value}"
        launch = outcome.value
    return launch, None


def _plain_launch(value: object) -> Launch | str:
    """In the hook's process: what ``wrap_argv`` returned as a ``Launch`` of plain ``str``,
    ``tuple``, ``dict`` and ``Path`` (a plugin's subclass runs code when read), or what is
    wrong with it."""
    if not isinstance(value, Launch):
        return f"{type(value).__name__}, not a Launch"
    if (problem := launch_problem(value)) is not None:
        return f"an invalid launch: {problem}"
    return Launch(argv=tuple(map(str.__str__, value.argv)),
                  env={str.__str__(k): str.__str__(v) for k, v in value.env.items()},
                  cwd=Path(str.__str__(os.fspath(value.cwd))))


def probe_attach(cell: Cell, registry: Registry) -> str | None:
    """Why the cell's collectors cannot attach on this machine (``wrap_argv`` into a scratch
    folder raised), or ``None`` when they can. Nothing is run."""
    with tempfile.TemporaryDirectory(prefix="aorta-probe-") as scratch:
        trial_dir = Path(scratch)
        order = registry.wrap_order(list(cell.collectors))
        folders = _prepare(trial_dir, order)
        return _wrap(registry, cell, order, folders, _base_launch(cell, trial_dir, 0))[1]


def _collect(registry: Registry, cell: Cell, trial_dir: Path, folders: dict[str, Path],
             run: TrialRun | None, notes: Notes, tables: KernelTables
             ) -> tuple[dict[str, CollectorRecord], dict[str, Any]]:
    """Per collector: its artifacts (after a run), its metrics and its kernel table rows, each
    hook isolated."""
    records, metrics = {}, {}
    for name, folder in folders.items():
        options = cell.collectors[name]
        artifacts: list[str] = []
        if run is not None and (folder.is_symlink() or not folder.is_dir()):
            notes.add(name, f"the payload replaced its artifact folder {folder} with "
                            f"{make_real(folder)}; nothing was read through it")
        if run is not None:
            artifacts = notes.call(name, "collect_artifacts", lambda n=name, o=options, f=folder:
                                   _artifact_paths(registry.call(
                                       n, "collect_artifacts", artifact_dir=f, options=o,
                                       run=run), f), [], may_refuse=True)
            metrics.update(collector_metrics(registry, name, folder, options, notes, tables))
        metrics[f"{name}_artifact_dir"] = safe_text(str(folder))
        records[name] = CollectorRecord(
            version=registry.collectors[name].version,
            options=dataclasses.asdict(options) if dataclasses.is_dataclass(options) else {},
            artifacts=[safe_text(_relative(Path(a), trial_dir)) for a in artifacts],
        )
    return records, metrics


def _artifact_paths(returned: object, folder: Path) -> list[str]:
    """In the hook's process: the paths ``collect_artifacts`` returned, as text; every file in
    ``folder`` when it returned none or no list. What is not a path is left out, each oddity
    noted as a warning of the call."""
    if not isinstance(returned, list | tuple):
        if returned is not None:
            warnings.warn(f"collect_artifacts returned {type(returned).__name__}, not a list; "
                          "listing the folder instead", stacklevel=1)
        return [str(p) for p in files_under(folder) if p.is_file()]
    paths, odd = [], []
    for item in list(returned):
        try:
            path = os.fspath(item) if isinstance(item, str | os.PathLike) else None
        except Exception:  # a plugin's __fspath__ raised
            odd.append(f"{type(item).__name__} whose path cannot be read")
            continue
        if isinstance(path, str):
            paths.append(str.__str__(path))
        else:
            odd.append(type(item).__name__ if path is None else f"a path of {type(path).__name__}")
    if odd:
        warnings.warn(f"collect_artifacts returned {len(odd)} item(s) that are not paths "
                      f"({', '.join(sorted(set(odd))[:5])}; a path is str or os.PathLike); "
                      "left out of the record", stacklevel=1)
    return paths


def _relative(path: Path, base: Path) -> str:
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def _verdict(outcome: ProcessOutcome | None, error: str | None, cell: Cell, stderr: Path
             ) -> tuple[str, str | None]:
    if error is not None:
        return "error", error
    if outcome.timed_out:
        return "fail", f"timed out after {cell.timeout_s:g} s; process group ended"
    if outcome.returncode != 0:
        return "fail", describe(outcome.returncode, stderr)
    return "pass", None


def _env_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    changed: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changed.update({k: None for k in before if k not in after})
    return {safe_text(k): None if v is None else safe_text(v) for k, v in changed.items()}


#: A step the caller adds after a trial ran and its collectors parsed, before retention prunes
#: its files: (the trial's folder, what the trial knows so far: ``started_at_unix``,
#: ``wall_time_s``, ``collectors``). The app writes the merged timeline there; the engine knows
#: no report.
AfterRun = Callable[[Path, Mapping[str, Any]], None]


def run_trial(cell: Cell, index: int, registry: Registry, after_run: AfterRun | None = None
              ) -> TrialRecord:
    """Run trial ``index`` of ``cell`` and write its record; return the record."""
    trial_dir = cell.trial_dir(index)
    attempt = start_attempt(trial_dir, RECORD_NAME)
    order = registry.wrap_order(list(cell.collectors))
    folders = _prepare(trial_dir, order)
    guard = TrialFolders(trial_dir)
    notes = Notes(cell.hook_timeout_s)
    started = time.time()
    given = _base_launch(cell, trial_dir, index)
    launch, error = _wrap(registry, cell, order, folders, given)
    stdout, stderr = trial_dir / STDOUT_NAME, trial_dir / STDERR_NAME
    outcome = None
    if error is None:
        try:
            outcome = run_launch(launch, stdout, stderr, cell.timeout_s)
        except OSError as exc:
            error = (f"cannot start {safe_text(launch.argv[0])!r}: "
                     f"{exc.strerror or exception_line(exc)}")
        except WatchdogError as exc:
            error = str(exc)
    swapped = guard.swapped() if outcome is not None else None
    run = outcome and TrialRun(launch, outcome.returncode, outcome.timed_out, stdout, stderr)
    tables = KernelTables(trial_dir / KERNELS_NAME)
    collectors, metrics = _collect(registry, cell, trial_dir, {} if swapped else folders, run,
                                   notes, tables)
    if not swapped:
        metrics.update(workload_metrics(trial_dir / WORKLOAD_METRICS_NAME, notes))
    if error is None and notes.unmeasured:  # a collector's profiler could not start in the run
        error = "; ".join(named_once(n, why) for n, why in notes.unmeasured.items())
    verdict, error = ("fail", swapped) if swapped else _verdict(outcome, error, cell, stderr)
    wall = round(outcome.wall_time_s, 6) if outcome else None  # as the record keeps it, so the
    # trial's own timeline places lanes as `aorta timeline` of its record.json does
    if after_run is not None and outcome is not None and not swapped:  # before retention
        after_run(trial_dir, {"started_at_unix": started, "wall_time_s": wall,  # prunes the
                              "collectors": msgspec.to_builtins(collectors),  # traces
                              "verdict": verdict, "error": error})
    level = cell.retain.get(f"on_{verdict}", "full")
    deleted = [] if swapped else prune(trial_dir, level, list(folders.values()),
                                       [stdout, stderr], cell.log_limit_mb)
    record = TrialRecord(
        cell=cell.name, axes=dict(cell.axes), trial=index, attempt=attempt, verdict=verdict,
        error=error and safe_text(error),
        exit_code=outcome.returncode if outcome else None,
        timed_out=outcome.timed_out if outcome else False,
        wall_time_s=wall,
        started_at=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        started_at_unix=started,
        argv=[safe_text(a) for a in given.argv], argv_run=[safe_text(a) for a in launch.argv],
        env_run=_env_changes(given.env, launch.env),
        cell_env={safe_text(k): safe_text(v) for k, v in cell.env.items()},
        cwd=safe_text(str(given.cwd)),
        stdout=STDOUT_NAME if stdout.exists() else None,
        stderr=STDERR_NAME if stderr.exists() else None,
        environment=environment.snapshot() | {"collectors": registry.versions()},
        collectors=collectors, warnings=notes.by_collector,
        retention=Retention(level, deleted), fingerprint=cell.fingerprint,
        auto=AutoRecord(**cell.auto.to_json()) if cell.auto else None,
        metrics=metrics, kernels=tables.record(),
        recorded_at_unix=time.time(),
    )
    return write_record(trial_dir / RECORD_NAME, record)
