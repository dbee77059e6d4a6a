"""What the process that drives a sweep does around Hydra's jobs: check the output folder, hold the
lock, write the matrix at the end and turn the outcome into the exit status.

Exit status: 0 every trial passed; 1 a trial failed or errored or a cell was refused (0 anyway
with ``allow_failures=true``); 2 a usage error; 130 interrupted (Ctrl-C);
143 terminated (SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aorta_core.api.oneline import exception_line
from aorta_core.engine.lock import SweepLock, SweepLockedError
from aorta_core.engine.progress import error_line, warning_line
from aorta_core.engine.records import RECORD_NAME

MULTIRUN_YAML = "multirun.yaml"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's cancel): the sweep stops as after Ctrl-C (the running
    trial's process group ended, the lock released, resumable), with status 143."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """In the block SIGTERM raises :class:`Terminated`, as Ctrl-C raises KeyboardInterrupt, so
    what the block started (a trial's process group, worker processes) is ended on the way out
    instead of outliving this process."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SweepAbort(BaseException):
    """No trial can go on (e.g. the disk is full): one line, the lock released, exit status 1.

    A ``BaseException`` so that Hydra's job runner, which reports every ``Exception`` with a
    traceback, lets it through to :func:`drive`.
    """


def _writable(output: Path) -> str | None:
    """Why the sweep cannot write into ``output``: not writable, or ``cells`` or a cell folder
    in it a link."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".aorta.write-test.", dir=output)  # never a link
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write to output={output} ({exc.strerror}); choose a writable output=<dir>"
    cells = output / "cells"
    links = [cells] if cells.is_symlink() else sorted(
        p for p in (cells.iterdir() if cells.is_dir() else ()) if p.is_symlink())
    if links:  # a cell folder that is a link could not even say why its cell was refused
        return (f"{links[0]} is a link; aorta writes only inside output: remove the link "
                "or choose another output=<dir>")
    return None


def _clear_multirun_yaml(output: Path) -> None:
    """Hydra's sweeper opens ``<output>/multirun.yaml`` for writing as it is: a link there (or a
    FIFO) is removed first, so the file it writes is a new one inside the output."""
    path = output / MULTIRUN_YAML
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()


def recorded_trials(output: Path) -> int:
    return sum(1 for _ in output.glob(f"cells/*/trial_*/{RECORD_NAME}"))


def status_of(cells: Iterable[dict[str, Any]], allow_failures: bool) -> int:
    """1 when a cell is :func:`~aorta_core.engine.matrix.incomplete`, unless failures are
    allowed."""
    from aorta_core.engine.matrix import incomplete

    bad = any(incomplete(c) for c in cells)
    return EXIT_FAILED if bad and not allow_failures else EXIT_OK


def _unstarted(exc: Exception) -> str:
    """The one line for what stopped Hydra before any trial ran."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from aorta_core.app.precheck import hydra_line
    from aorta_core.app.sbatch_hints import sbatch_fix

    if isinstance(exc, HydraException | OmegaConfBaseException):
        return hydra_line(exc)
    fix = sbatch_fix(str(exc)) or ("fix the launcher or the command line (HYDRA_FULL_ERROR=1 "
                                   "shows the traceback)")
    return f"the sweep could not start ({exception_line(exc)}); nothing ran: {fix}"


def _undo_start(output: Path, existing: Path, earlier: set[str]) -> None:
    """Remove what a sweep that never ran a trial wrote (Hydra's ``multirun.yaml``, a launcher's
    folders, the lock file while still held), and the folders it made below ``existing``."""
    for path in output.iterdir():
        if path.name in earlier:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        for folder in (output, *output.parents):
            if folder == existing:
                break
            folder.rmdir()


def drive(output: Path, run_jobs: Callable[[], None], allow_failures: bool) -> int:
    """Run the sweep's jobs into ``output`` under its lock; return the exit status.

    When Hydra or its launcher fails before any trial is recorded, the reason is one line, exit
    status 2, and what the attempt wrote is removed (nothing is left behind).
    """
    existing = next(p for p in (output, *output.parents) if p.exists())
    earlier = {p.name for p in output.iterdir()} if output.is_dir() else set()
    problem = _writable(output)
    if problem is not None:
        error_line(problem)
        return EXIT_USAGE
    lock = SweepLock(output)
    try:
        previous = lock.acquire()
    except SweepLockedError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    if previous:
        warning_line(f"taking over the lock of a sweep that ended without releasing it "
                     f"(pid {previous.get('pid', '?')} on {previous.get('host', '?')})")
    recorded = recorded_trials(output)
    _clear_multirun_yaml(output)
    with sigterm_interrupts():
        try:
            run_jobs()
        except SweepAbort as exc:
            error_line(str(exc))
            return EXIT_FAILED
        except KeyboardInterrupt as exc:
            for signum in (signal.SIGINT, signal.SIGTERM):  # a second one must not cut this short
                signal.signal(signum, signal.SIG_IGN)
            how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            error_line(f"{how}: {recorded_trials(output)} trials recorded; "
                       "run the same command again to resume")
            return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
        except Exception as exc:
            if recorded_trials(output) > recorded:  # trials ran: a fault of a job, not of the
                if os.environ.get("HYDRA_FULL_ERROR") == "1":  # command line
                    raise
                error_line(f"the sweep stopped ({exception_line(exc)}); "
                           f"{recorded_trials(output)} trial records are kept: run the same "
                           "command again to resume (HYDRA_FULL_ERROR=1 shows the traceback)")
                return EXIT_FAILED
            _undo_start(output, existing, earlier)
            if os.environ.get("HYDRA_FULL_ERROR") == "1":  # Hydra's switch for the traceback
                raise
            error_line(_unstarted(exc))
            return EXIT_USAGE
        else:
            return _finish(output, allow_failures)
        finally:
            lock.release()


def _finish(output: Path, allow_failures: bool) -> int:
    from aorta_core.app.summary import finish

    try:
        result = finish(output)
    except Exception as exc:  # the records are safe; only the merge failed
        error_line(f"could not write the matrix of {output} ({exception_line(exc)}); "
                   f"the trial records are kept: fix the cause, then run aorta matrix {output}")
        return EXIT_FAILED
    return status_of(result.cells, allow_failures)
