""":func:`~aorta_core.api.parallel.parallel_map`'s items as Slurm jobs, through submitit.

A 1,024-GPU job writes 1,024 rank traces of 0.2-2 GB a profiled window: one host's cores and
memory do not hold that. With ``AORTA_SLURM`` set (``aorta parse``, ``diagnose`` and
``timeline`` set it from ``--slurm``), every item of a map is one task of a Slurm job array: the
task runs ``fn(item)`` as a local worker would (warnings and all), submitit pickles its small
result to the shared folder, and the caller reads the results back one at a time in the items'
order, so it holds one result at a time. Each task asks for the memory the map's ``need``
estimates for the largest item (times ``mem_factor``; at least 1 GB; the estimates are the local
workers' memory plan, already a peak with room). A task that ends without a
result (killed, out of memory, out of time, node failure) is submitted once more; a second loss
is that item's error, with the job's state and its log.

``AORTA_SLURM`` holds ``key=value`` pairs separated by commas: ``partition``, ``time``
(minutes a task may run, default 60), ``account``, ``qos``, ``constraint``, ``cpus`` (per task,
default 1), ``mem_factor`` (default 1), ``mem_gb`` (a fixed request instead; ``none``: no
request, where the cluster does not schedule memory), ``parallel``
(tasks running at once, default all), ``folder`` (where submitit keeps each job's pickles and
logs, on a file system every node sees; default ``./aorta-slurm``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from aorta_core.api.item_call import Mapped, run

#: Set: every :func:`~aorta_core.api.parallel.parallel_map` of this process and its children
#: runs its items as Slurm tasks.
SLURM_ENV = "AORTA_SLURM"

_GB = 1 << 30

T = TypeVar("T")


class SlurmError(ValueError):
    """``AORTA_SLURM`` cannot be used (a bad key or value, no Slurm to submit to); the message
    is the one line to show."""


@dataclass(frozen=True)
class SlurmSettings:
    """What each task of a map's job array asks Slurm for."""

    partition: str | None = None
    time: int = 60
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    cpus: int = 1
    mem_factor: float = 1.0
    #: A fixed request instead of one from the items' needs; ``0`` (``mem_gb=none``): none, for
    #: a cluster that does not schedule memory.
    mem_gb: float | None = None
    parallel: int | None = None
    folder: Path = field(default_factory=lambda: Path("aorta-slurm"))

    def memory_gb(self, need_bytes: int) -> float | None:
        """The request for a task whose largest item needs ``need_bytes``; ``None``: none."""
        if self.mem_gb is not None:
            return self.mem_gb or None
        return max(1.0, round(self.mem_factor * need_bytes / _GB, 1))


_TYPES: dict[str, Callable[[str], Any]] = {
    "partition": str, "account": str, "qos": str, "constraint": str, "time": int, "cpus": int,
    "mem_factor": float, "mem_gb": float, "parallel": int, "folder": Path}


def parse_settings(spec: str) -> SlurmSettings:
    """``"partition=gpu,time=30"`` -> :class:`SlurmSettings`; :class:`SlurmError` naming the
    first thing wrong. An empty spec takes every default."""
    given: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, equals, value = part.partition("=")
        key = key.strip()
        if key not in _TYPES or not equals or not value.strip():
            known = ", ".join(f.name for f in fields(SlurmSettings))
            raise SlurmError(f"--slurm {part!r}: give key=value pairs separated by commas, the "
                             f"keys among {known}")
        if key == "mem_gb" and value.strip().lower() == "none":
            given[key] = 0.0
            continue
        try:
            given[key] = _TYPES[key](value.strip())
        except ValueError:
            raise SlurmError(f"--slurm {part!r}: {key} takes "
                             f"{'a number' if _TYPES[key] is not str else 'text'}") from None
        if isinstance(given[key], int | float) and not given[key] > 0:
            raise SlurmError(f"--slurm {part!r}: {key} must be above 0")
    return SlurmSettings(**given)


def settings_from_env() -> SlurmSettings | None:
    """The settings ``AORTA_SLURM`` gives, ``None`` where it is unset."""
    spec = os.environ.get(SLURM_ENV)
    return None if spec is None else parse_settings(spec)


def slurm_map(fn: Callable[[Any], T], items: Sequence[Any], needs: Sequence[int],
              settings: SlurmSettings) -> Iterator[Any]:
    """:class:`~aorta_core.api.parallel.Mapped` of ``fn(item)`` for every item, in order, each
    item a task of one job array; warnings a task emitted are emitted here as it is read."""
    import warnings

    if not items:
        return
    jobs = _submit(fn, items, max(needs, default=0), settings, "")
    try:
        for i, item in enumerate(items):
            done = _outcome(jobs[i])
            if isinstance(done, str):  # lost: once more, alone
                (again,) = _submit(fn, [item], needs[i], settings, "-again")
                jobs.append(again)
                done = _outcome(again)
                if isinstance(done, str):
                    yield Mapped(item, error=f"{done}, twice (its log: {again.paths.stderr})",
                                 memory="OUT_OF_MEMORY" in done)
                    continue
            mapped, caught = done
            for category, message in caught:
                warnings.warn(message, category, stacklevel=2)
            yield mapped
    except BaseException:  # Ctrl-C, SIGTERM, the caller stopped early: no task outlives it
        for job in jobs:
            if not job.done():
                job.cancel(check=False)
        raise


def _task(fn: Callable[[Any], Any], item: Any) -> tuple[Any, list]:
    """On the node, in the environment the job was submitted from (Slurm exports it): ``fn(item)``
    as a local worker runs it; a map inside it runs on the node's cores."""
    os.environ.pop(SLURM_ENV, None)
    return run(fn, item)


def _submit(fn: Callable[[Any], Any], items: Sequence[Any], need: int, settings: SlurmSettings,
            suffix: str) -> list[Any]:
    import submitit

    folder = settings.folder.absolute()  # the tasks may start elsewhere
    folder.mkdir(parents=True, exist_ok=True)
    executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    name = getattr(getattr(fn, "func", fn), "__name__", "map")
    params: dict[str, Any] = {
        "name": f"aorta-{name}{suffix}", "timeout_min": settings.time,
        "cpus_per_task": settings.cpus, "slurm_array_parallelism": settings.parallel or len(items)}
    memory = settings.memory_gb(need)
    if memory is not None:
        params["mem_gb"] = memory
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(settings, key) is not None:
            params[f"slurm_{key}"] = getattr(settings, key)
    executor.update_parameters(**params)
    try:
        with _quiet_stderr(), executor.batch():
            jobs = [executor.submit(_task, fn, item) for item in items]
    except (OSError, submitit.core.utils.FailedJobError, RuntimeError) as exc:
        said = " ".join(str(exc).split())[:300]
        raise SlurmError(f"--slurm: Slurm refused the job array ({said}); check the partition, "
                         "account and time given") from None
    return jobs


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """sbatch's own lines kept off the terminal (submitit leaves its stderr there): a refusal
    is said once, in the error that quotes them."""
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _outcome(job: Any) -> tuple[Any, list] | str:
    """What the task returned, or why it returned nothing (its state in Slurm)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        return job.result()
    except (UncompletedJobError, FailedJobError):
        return f"Slurm job {job.job_id} ended {_state(job)} without a result"


def _state(job: Any) -> str:
    """The job's final state as sacct tells it (it may lag the job's end by a poll)."""
    for _ in range(10):
        state = job.state
        if state not in ("UNKNOWN", "PENDING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(1)
    return job.state
