"""One trial: fresh artifact folders, wrap, run, collect, parse, prune, record.

Every failure mode ends in a record: a collector that cannot attach makes the trial a setup
error, a collector that fails after the run only loses its metrics, and the record is written
atomically last, so a crash at any point leaves either no record (the trial re-runs) or a
complete one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from aorta_core import environment
from aorta_core.cells import Cell
from aorta_core.contracts import Launch, SetupError, TrialRun
from aorta_core.failure import describe
from aorta_core.plugins import Registry
from aorta_core.process import run_launch
from aorta_core.records import RECORD_NAME, SCHEMA_VERSION, write_json_atomic
from aorta_core.retention import prune

STDOUT_NAME = "stdout.log"
STDERR_NAME = "stderr.log"
WORKLOAD_METRICS_NAME = "workload_metrics.json"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _clean_metric(value: Any) -> Any:
    """Keep what the contract allows; ``None`` drops the metric (never invent a number)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


class Notes:
    """Collects per-collector warnings and hook failures into the record."""

    def __init__(self) -> None:
        self.by_collector: dict[str, list[str]] = {}

    def add(self, name: str, message: str) -> None:
        self.by_collector.setdefault(name, []).append(message)

    def call(self, name: str, what: str, fn, default):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = fn()
            except Exception as exc:
                self.add(name, f"{what} failed: {type(exc).__name__}: {_one_line(exc)}")
                result = default
        for w in caught:
            self.add(name, str(w.message))
        return result


def _prepare(trial_dir: Path, collectors: list[str]) -> dict[str, Path]:
    """Fresh, empty artifact folders for this attempt; no metrics left from an earlier one."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    folders = {}
    for name in collectors:
        folder = trial_dir / name
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        folders[name] = folder
    (trial_dir / WORKLOAD_METRICS_NAME).unlink(missing_ok=True)
    return folders


def _workload_metrics(path: Path, notes: Notes) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        notes.add("workload", f"{path.name} is not valid JSON ({_one_line(exc)}); metrics omitted")
        return {}
    if not isinstance(data, dict):
        notes.add("workload", f"{path.name} must hold a JSON object; metrics omitted")
        return {}
    out = {}
    for key, value in data.items():
        clean = _clean_metric(value)
        if clean is not None:
            out[f"workload_{key}"] = clean
    return out


def _metrics_of(name: str, raw: Any, notes: Notes) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        notes.add(name, f"parse_metrics returned {type(raw).__name__}, not a dict; ignored")
        return {}
    out = {}
    for key, value in raw.items():
        if not str(key).startswith(f"{name}_"):
            notes.add(name, f"metric {key!r} lacks the {name}_ prefix; dropped")
            continue
        clean = _clean_metric(value)
        if clean is None:
            notes.add(name, f"metric {key!r} has an unusable value {value!r}; dropped")
            continue
        out[str(key)] = clean
    return out


def collector_metrics(
    registry: Registry, name: str, folder: Path, options: Any, notes: Notes
) -> dict[str, Any]:
    """``parse_metrics`` of one collector, isolated and cleaned as the contract says.

    Shared by every trial and by ``aorta parse``, so both show the same metrics.
    """
    raw = notes.call(
        name, "parse_metrics",
        lambda: registry.call(name, "parse_metrics", artifact_dir=folder, options=options),
        None,
    )
    return _metrics_of(name, raw, notes)


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


def _env_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    changed: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changed.update({k: None for k in before if k not in after})
    return changed


def run_trial(cell: Cell, index: int, registry: Registry) -> dict[str, Any]:
    """Run trial ``index`` of ``cell`` and write its record; return the record."""
    trial_dir = cell.trial_dir(index)
    order = registry.wrap_order(list(cell.collectors))
    folders = _prepare(trial_dir, order)
    notes = Notes()
    started_unix = time.time()
    started = datetime.fromtimestamp(started_unix, UTC).isoformat(timespec="seconds")
    given = _base_launch(cell, trial_dir, index)
    launch, error = given, None
    for name in reversed(order):  # innermost first, so the first in ``order`` ends outermost
        try:
            launch = registry.call(
                name, "wrap_argv", launch=launch, options=cell.collectors[name],
                artifact_dir=folders[name],
            )
            if not isinstance(launch, Launch):
                raise SetupError(f"wrap_argv returned {type(launch).__name__}, not a Launch")
        except Exception as exc:
            kind = "" if isinstance(exc, SetupError) else f"{type(exc).__name__}: "
            error = f"{name}: {kind}{_one_line(exc)}"
            break

    stdout, stderr = trial_dir / STDOUT_NAME, trial_dir / STDERR_NAME
    outcome = None
    if error is None:
        try:
            outcome = run_launch(launch, stdout, stderr, cell.timeout_s)
        except OSError as exc:
            error = f"cannot start {launch.argv[0]!r}: {exc.strerror or _one_line(exc)}"

    metrics: dict[str, Any] = {}
    collector_records: dict[str, Any] = {}
    run = TrialRun(
        launch=launch,
        returncode=outcome.returncode if outcome else None,
        timed_out=outcome.timed_out if outcome else False,
        stdout_path=stdout,
        stderr_path=stderr,
    )
    for name in order:
        options = cell.collectors[name]
        artifacts: list[Any] = []
        if outcome is not None:
            artifacts = notes.call(
                name, "collect_artifacts",
                lambda n=name, o=options: registry.call(
                    n, "collect_artifacts", artifact_dir=folders[n], options=o, run=run
                ),
                [],
            )
            if artifacts is None:  # not implemented: the profiler wrote straight into the folder
                artifacts = sorted(p for p in folders[name].rglob("*") if p.is_file())
            metrics.update(collector_metrics(registry, name, folders[name], options, notes))
        metrics[f"{name}_artifact_dir"] = str(folders[name])
        collector_records[name] = {
            "version": registry.collectors[name].version,
            "options": (dataclasses.asdict(options) if dataclasses.is_dataclass(options)
                        else options),
            "artifacts": [str(Path(a).relative_to(trial_dir)) if Path(a).is_relative_to(trial_dir)
                          else str(a) for a in artifacts],
        }
    metrics.update(_workload_metrics(trial_dir / WORKLOAD_METRICS_NAME, notes))

    if error is not None:
        verdict = "error"
    elif outcome.timed_out:
        verdict, error = "fail", f"timed out after {cell.timeout_s:g} s; process group ended"
    elif outcome.returncode != 0:
        verdict, error = "fail", describe(outcome.returncode, stderr)
    else:
        verdict = "pass"
    level = cell.retain.get(f"on_{verdict}", "full")
    logs = [stdout, stderr]
    deleted = prune(trial_dir, level, list(folders.values()), logs)

    record = {
        "schema_version": SCHEMA_VERSION,
        "cell": cell.name,
        "axes": dict(cell.axes),
        "trial": index,
        "verdict": verdict,
        "error": error,
        "exit_code": outcome.returncode if outcome else None,
        "timed_out": outcome.timed_out if outcome else False,
        "wall_time_s": round(outcome.wall_time_s, 6) if outcome else None,
        "started_at": started,
        "started_at_unix": started_unix,
        "argv": list(given.argv),
        "argv_run": list(launch.argv),
        "env_run": _env_changes(given.env, launch.env),
        "cell_env": dict(cell.env),
        "cwd": str(given.cwd),
        "stdout": STDOUT_NAME if stdout.exists() else None,
        "stderr": STDERR_NAME if stderr.exists() else None,
        "environment": environment.snapshot() | {"collectors": registry.versions()},
        "collectors": collector_records,
        "warnings": notes.by_collector,
        "retention": {"level": level, "deleted": deleted},
        "fingerprint": cell.fingerprint,
        "auto": cell.auto.to_json() if cell.auto else None,
        "metrics": metrics,
        "recorded_at_unix": time.time(),
    }
    write_json_atomic(trial_dir / RECORD_NAME, record)
    return record
