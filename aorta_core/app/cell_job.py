"""The Hydra application: one Hydra job is one cell of the sweep."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

import hydra
import msgspec
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.plugins.config_source import ConfigLoadError
from omegaconf import DictConfig, OmegaConf

from aorta_core.api.files import READ_LIMIT_ENV, disk_full
from aorta_core.app.driver import OTHER_RUN, RERUN, UNFINISHED, SweepAbort
from aorta_core.engine.argv import to_config
from aorta_core.engine.cell_state import (
    OtherRun,
    kept_unmeasured,
    refuse,
    trial_state,
    unfinished,
    write_cell_file,
)
from aorta_core.engine.cells import Cell, ConfigError, build_cell, cell_name, place_of
from aorta_core.engine.plugins import load_registry
from aorta_core.engine.progress import CellProgress, cell_label, console, error_line, warning_line
from aorta_core.engine.records import RECORD_NAME, TrialRecord, write_record
from aorta_core.engine.slots import device_slot
from aorta_core.engine.swaps import OutputSwapped
from aorta_core.engine.trial import run_trial
from aorta_core.reports.diagnose import diagnose_step
from aorta_core.reports.timeline import timeline_step
from aorta_core.reports.timeline_selection import Ints

OmegaConf.register_new_resolver("aorta_cell", cell_name, replace=True)
OmegaConf.register_new_resolver("aorta_python", lambda: sys.executable, replace=True)


#: Where the driver leaves the swept keys for the jobs: outside the config's defaults, and carried
#: with the ConfigStore to the workers of a parallel launcher.
_SWEPT = ("aorta_internal", "swept")


def register_command(command: list[str] | None, swept: tuple[str, ...] = ()) -> None:
    """Carry the argv given after ``--`` into the config as the ``command`` key, and the keys the
    sweep varies to the jobs (they name each trial's cell by them)."""
    store = ConfigStore.instance()
    if command is not None:
        store.store(group="aorta_cli", name="argv",
                    node={"command": [to_config(a) for a in command]}, package="_global_")
    store.store(group=_SWEPT[0], name=_SWEPT[1], node={"keys": list(swept)})


def _swept() -> list[str]:
    try:
        return list(ConfigStore.instance().load(f"{_SWEPT[0]}/{_SWEPT[1]}.yaml").node["keys"])
    except ConfigLoadError:  # a job launched without the driver (Hydra's --experimental-rerun)
        return []


def _after_run(cell: Cell):
    """The steps after each trial: its timeline (``timeline=true``), then its diagnosis
    (``diagnose=true``); ``None`` when it asks for neither."""
    steps = [s for s in (timeline_step(cell), diagnose_step(cell)) if s is not None]
    if not steps:
        return None

    def after_run(trial_dir: Path, record: Any) -> None:
        for step in steps:
            step(trial_dir, record)
    return after_run


class _EndedBySlurm:
    """In a job of the Slurm launcher (submitit's ``SUBMITIT_EXECUTOR=slurm``), the scheduler
    ending the cell's job. Slurm signals
    every process of the job, the running trial's too, so that trial's death says nothing of the
    workload:

    - SIGUSR2, which submitit asks for ``hydra.launcher.signal_delay_s`` before the job's time
      limit: the running trial is recorded as timed out, with that reason, and the cell stops;
    - SIGTERM alone (``scancel``, a preemption): the running trial's record is removed, for the
      same command to run it again, and the cell stops.

    Elsewhere nothing changes: a whole sweep run inside an allocation of the user's own (sbatch,
    salloc) ends on SIGTERM as any sweep does, with its resume line."""

    def __init__(self) -> None:
        self.signals: set[int] = set()
        self._before: dict[int, Any] = {}

    @property
    def ended(self) -> bool:
        return bool(self.signals)

    def _note(self, signum: int, frame: Any) -> None:
        self.signals.add(signum)

    def __enter__(self) -> _EndedBySlurm:
        if os.environ.get("SUBMITIT_EXECUTOR") == "slurm":
            for sig in (signal.SIGTERM, signal.SIGUSR2):
                self._before[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, before in self._before.items():
            signal.signal(sig, before)

    def settle(self, cell: Cell, index: int, record: TrialRecord) -> None:
        """Record the trial the job's end cut short as timed out, or not at all."""
        job = os.environ.get("SLURM_JOB_ID")
        path = cell.trial_dir(index) / RECORD_NAME
        if signal.SIGUSR2 in self.signals:
            reason = (f"Slurm job {job} reached its time limit (signalled "
                      "hydra.launcher.signal_delay_s before it); trial ended: raise "
                      "hydra.launcher.timeout_min")
            write_record(path, msgspec.structs.replace(record, verdict="fail", timed_out=True,
                                                       error=reason))
            warning_line(f"{cell.name} trial {index}: {reason}; later trials are not run")
            return
        path.unlink(missing_ok=True)
        warning_line(f"Slurm ended job {job} (SIGTERM) during {cell.name} trial {index}; that "
                     "trial and the ones after it are not recorded: run the same command again "
                     "to run them")


def _run_trials(cfg: DictConfig, cell: Cell, todo: dict[int, str], registry) -> dict[str, int]:
    verdicts: dict[str, int] = {}
    devices = OmegaConf.to_container(cfg.devices) if cfg.get("devices") is not None else None
    slot = device_slot(Path(str(cfg.output)), devices, int(cfg.devices_per_cell),
                       list(cfg.device_env)) if todo else contextlib.nullcontext({})
    with slot as device_env:
        cell = dataclasses.replace(cell, env={**cell.env, **device_env})
        label = cell_label(cell.name, cell.axes, _swept())
        trials = int(cfg.trials)
        kept = [i for i in range(trials) if i not in todo]
        recorded = sum((cell.trial_dir(i) / RECORD_NAME).is_file() for i in kept)
        with (CellProgress(cell, trials, todo, label, recorded, header=not cfg.get("round"),
                           kept=kept_unmeasured(cell, kept))
              as progress,
              _EndedBySlurm() as slurm):
            for index in todo:
                progress.start(index)
                record = run_trial(cell, index, registry, _after_run(cell))
                if slurm.ended:
                    slurm.settle(cell, index, record)
                    break
                progress.done(index, record)
                verdicts[record.verdict] = verdicts.get(record.verdict, 0) + 1
    return verdicts


def _indices(cfg: DictConfig) -> range:
    """The trials this job runs: every one, or under ``order=rounds`` its round's (the driver
    gives each pass ``+round=<index>``)."""
    trials, index = int(cfg.trials), cfg.get("round")
    return range(trials) if index is None else range(int(index), min(int(index) + 1, trials))


def _one_cell(cfg: DictConfig, hydra_cfg: Any, registry) -> dict[str, Any]:
    place = place_of(hydra_cfg)
    first = not cfg.get("round")  # a later round: its refusals were said in round 0
    try:
        cell = build_cell(cfg, place, registry)
        todo = {i: why for i in _indices(cfg) if (why := trial_state(cell, i))}
    except ConfigError as exc:
        return refuse(place, str(exc), say=first)
    except OtherRun as exc:  # its folder is another run's: left as it is
        if first:
            error_line(f"cell {place.name}: {exc}")
        return {"cell": place.name, "error": str(exc), OTHER_RUN: True}
    write_cell_file(cell, int(cfg.trials))
    value = {"cell": cell.name, "verdicts": _run_trials(cfg, cell, todo, registry),
             RERUN: [why for why in todo.values() if why != "new"]}
    if cfg.get("round") == 0:
        value[UNFINISHED] = unfinished(cell, range(1, int(cfg.trials)))
    return value


def run_cell(cfg: DictConfig) -> dict[str, Any]:
    """Run the missing trials of this job's cell (resume: recorded trials are kept); with
    ``agree`` set, the job runs the agreement cells instead (:mod:`aorta_core.app.agree`)."""
    hydra_cfg = HydraConfig.get()
    registry = load_registry()
    os.environ[READ_LIMIT_ENV] = str(cfg.read_limit_mb)  # for the collectors' parsers
    try:
        if cfg.get("agree") is not None:
            from aorta_core.app.agree import run_agreement

            return run_agreement(cfg, registry)
        return _one_cell(cfg, hydra_cfg, registry)
    except OutputSwapped as exc:  # no later trial could write into the output either
        raise SweepAbort(str(exc)) from None
    except OSError as exc:
        where = exc.filename or cfg.output
        if disk_full(exc):  # out of space, read-only, quota: no later write can succeed either
            raise SweepAbort(f"cannot write {where} ({exc.strerror or exc}); the records written "
                             "so far are kept: free space, then run the same command again"
                             ) from None
        # a permission or a file of this cell (e.g. an immutable file a payload left): the
        # other cells go on
        return refuse(place_of(hydra_cfg), f"cannot write or remove {where} ("
                      f"{exc.strerror or exc}); the records written so far are kept: fix it, "
                      "then run the same command again")


@hydra.main(version_base="1.3", config_path="pkg://aorta_core.conf", config_name="config")
def hydra_main(cfg: DictConfig) -> dict[str, Any]:
    return run_cell(cfg)


def run_jobs() -> list[dict[str, Any]]:
    """Hydra's jobs for ``sys.argv``, with an error Hydra would report raised to the caller;
    what each job returned (:func:`run_cell`), from whichever launcher ran it.

    Hydra prints what it catches (a multi-line report, a traceback) and exits 1; the driver wants
    the exception, to say it in one line and remove what the failed start wrote. Setting Hydra's
    switch for that, the HYDRA_FULL_ERROR variable, would change every trial's environment, so
    its reporter is bypassed for the duration of the sweep instead (the driver still honours the
    variable when the user sets it: then the traceback is shown).
    """
    return _job_values(_launched())


def _launched() -> list[Any]:
    """What Hydra's calls for ``sys.argv`` returned (see :func:`run_jobs`)."""
    import hydra._internal.utils as hydra_utils

    report = hydra_utils.run_and_report
    returned: list[Any] = []
    hydra_utils.run_and_report = lambda func: returned.append(func()) or returned[-1]
    try:
        hydra_main()
    finally:
        hydra_utils.run_and_report = report
    return returned


def run_rounds(argv: list[str], flags: tuple[str, ...], trials: int) -> list[dict[str, Any]]:
    """``order=rounds``: the sweep's jobs once per trial index, each job running that trial of
    its cell, so that drift of the machine between trials hits every cell alike. ``argv``:
    Hydra's command line without its flags, which go last. A later round no cell has a trial to
    run in (a re-run of a finished sweep) is not launched: composing its jobs' configurations
    costs ~0.5 s a cell."""
    values: list[dict[str, Any]] = []
    wanted = set(range(trials))
    for index in range(trials):
        if index not in wanted:
            continue
        console().print(f"[bold]round {index + 1}/{trials}[/]: trial {index} of every cell")
        sys.argv = [*argv, f"+round={index}", *flags]
        returned = _launched()
        found = _job_values(returned)
        values += found
        if found and all(v.get(OTHER_RUN) for v in found):  # no cell of this run to run
            break
        if index == 0 and len(found) == _job_count(returned):
            wanted = _rounds_wanted(found, trials)
            if skipped := [(i, i) for i in range(1, trials) if i not in wanted]:
                console().print(f"trials {Ints(skipped).text()} of every cell are recorded "
                                "already: their rounds are not run")
    return values


def _rounds_wanted(found: list[dict[str, Any]], trials: int) -> set[int]:
    """The rounds some cell has a trial to run in, from round 0's jobs: a refused cell (an
    ``error``) is refused alike in every round; a job that did not say wants them all."""
    wanted = {0}
    for value in found:
        if UNFINISHED in value:
            wanted.update(value[UNFINISHED])
        elif "error" not in value:
            return set(range(trials))
    return wanted


def _job_count(value: Any) -> int:
    """How many jobs Hydra's calls ran, completed or not."""
    from hydra.core.utils import JobReturn

    if isinstance(value, JobReturn):
        return 1
    return sum(map(_job_count, value)) if isinstance(value, list | tuple) else 0


def _job_values(value: Any) -> list[dict[str, Any]]:
    """The values of the completed jobs among what Hydra's calls returned (the sweeper returns
    its launcher's ``JobReturn`` objects, batch by batch)."""
    from hydra.core.utils import JobReturn, JobStatus

    if isinstance(value, JobReturn):
        done = value.status == JobStatus.COMPLETED and isinstance(value.return_value, dict)
        return [value.return_value] if done else []
    if isinstance(value, list | tuple):
        return [v for item in value for v in _job_values(item)]
    return []
