"""What the process that drives a sweep does around Hydra's jobs: check the output folder, hold the
lock, write the matrix at the end and turn the outcome into the exit status.

Exit status: 0 every trial passed; 1 a trial failed or errored or a cell was refused (0 anyway
with ``allow_failures=true``); 2 a usage error; 130 interrupted (Ctrl-C);
143 terminated (SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import stat
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aorta_core.api.files import FileRefused, read_regular, remove, write_atomic
from aorta_core.api.oneline import exception_line
from aorta_core.engine.lock import SweepLock, SweepLockedError
from aorta_core.engine.progress import console, error_line, escape, rerun_what, warning_line
from aorta_core.engine.records import RECORD_LIMIT, RECORD_NAME

MULTIRUN_YAML = "multirun.yaml"
#: What a job's value holds for the driver: its cell was refused as another run's and left
#: untouched; why each of its recorded trials that ran again did (``error``, ``fail``, ``bad``);
#: under ``order=rounds``, round 0's list of the later trials its cell still has to run.
OTHER_RUN, RERUN, UNFINISHED = "other_run", "rerun", "unfinished"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's cancel): the sweep stops as after Ctrl-C (the running
    trial's process group ended, the lock released, resumable), with status 143."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[list[int]]:
    """In the block SIGTERM raises :class:`Terminated`, as Ctrl-C raises KeyboardInterrupt, so
    what the block started (a trial's process group, worker processes) is ended on the way out
    instead of outliving this process. The list it gives holds each SIGTERM received: a library
    running when it came (polars writing the matrix) may turn the exception into one of its own,
    and the signal still decides how the block ends."""
    received: list[int] = []

    def terminate(signum: int, frame: Any) -> None:
        received.append(signum)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


class SweepAbort(BaseException):
    """No trial can go on (e.g. the disk is full): one line, the lock released, exit status 1.

    A ``BaseException`` so that Hydra's job runner, which reports every ``Exception`` with a
    traceback, lets it through to :func:`drive`.
    """


def _writable(output: Path) -> str | None:
    """Why the sweep cannot write into ``output``: a folder of the user's own (aorta would
    replace their ``perf.md``), not writable, or ``cells`` or a cell folder in it a link."""
    from aorta_core.app.run_folder import foreign_files

    foreign = foreign_files(output)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                          else "")
        return (f"output={output} holds files aorta did not write ({shown}); a sweep writes "
                "cells/, matrix.json, perf.md and report.html there: choose a new or empty "
                "output=<dir>")
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


def _trial_stamps(output: Path) -> dict[Path, int]:
    """Each trial folder and when it last changed: a trial that started (a new folder, a new
    attempt, a payload's file) changes them, recorded or not."""
    stamps = {}
    for folder in output.glob("cells/*/trial_*"):
        with contextlib.suppress(OSError):
            stamps[folder] = os.lstat(folder).st_mtime_ns
    return stamps


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


class _TopFiles:
    """The files at the output's top that a sweep rewrites as it starts, before any cell runs
    (its run file, Hydra's ``multirun.yaml``): kept as they were, to be put back, bytes and
    times, by a sweep that ends having changed nothing."""

    def __init__(self, output: Path) -> None:
        from aorta_core.app.run_folder import RUN_FILE

        self.saved: dict[Path, tuple[bytes, os.stat_result] | None] = {}
        for path in (output / RUN_FILE, output / MULTIRUN_YAML):
            try:
                self.saved[path] = (read_regular(path, RECORD_LIMIT), os.stat(path))
            except (OSError, FileRefused):  # none there, or not aorta's to keep (a link, FIFO)
                self.saved[path] = None

    def put_back(self) -> None:
        for path, kept in self.saved.items():
            if kept is None:
                path.unlink(missing_ok=True)
                continue
            write_atomic(path, kept[0])
            os.utime(path, ns=(kept[1].st_atime_ns, kept[1].st_mtime_ns))


def _undo_start(output: Path, existing: Path, earlier: set[str], top: _TopFiles) -> None:
    """Remove what a sweep that never ran a trial wrote (Hydra's ``multirun.yaml``, a launcher's
    folders, the lock file while still held, its run file), and the folders it made below
    ``existing``; what an earlier run had there is put back as it was."""
    top.put_back()
    for path in output.iterdir():
        if path.name not in earlier:
            with contextlib.suppress(OSError):
                remove(path, output)
    with contextlib.suppress(OSError):
        for folder in (output, *output.parents):
            if folder == existing:
                break
            folder.rmdir()


def drive(output: Path, run_jobs: Callable[[], list[dict[str, Any]]], allow_failures: bool,
          run: str, existing: Path | None = None) -> int:
    """Run the sweep's jobs into ``output`` under its lock; return the exit status. ``run``: the
    command line's identity (:func:`~aorta_core.app.run_folder.identity`), kept in the output's
    run file; ``existing``: the folder that existed before the caller made ``output``.

    When Hydra or its launcher fails before any trial is recorded, the reason is one line, exit
    status 2, and what the attempt wrote is removed (nothing is left behind). When every cell
    is refused as another run's (:data:`OTHER_RUN`), nothing in the output changes.
    """
    from aorta_core.app.run_folder import mark_started

    existing = existing or next(p for p in (output, *output.parents) if p.exists())
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
    stamps = _trial_stamps(output)
    top = _TopFiles(output)
    _clear_multirun_yaml(output)
    with sigterm_interrupts() as received:
        try:
            mark_started(output, run)
            values = run_jobs()
            if values and all(v.get(OTHER_RUN) for v in values):
                top.put_back()
                return EXIT_USAGE
            status = _finish(output, run, allow_failures, received)  # a signal here: resumed
            _rerun_line(values)
            refused = any(v.get(OTHER_RUN) for v in values) and not allow_failures
            return max(status, EXIT_FAILED if refused else EXIT_OK)
        except SweepAbort as exc:
            error_line(str(exc))
            return EXIT_FAILED
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or received:
                return _interrupted(output, isinstance(exc, Terminated) or bool(received))
            if not isinstance(exc, Exception):
                raise
            if _trial_stamps(output) != stamps:  # a trial started: a fault of a job, not of the
                if os.environ.get("HYDRA_FULL_ERROR") == "1":  # command line; nothing is undone
                    raise
                error_line(f"the sweep stopped ({exception_line(exc)}); "
                           f"{recorded_trials(output)} trial records are kept: run the same "
                           "command again to resume (HYDRA_FULL_ERROR=1 shows the traceback)")
                return EXIT_FAILED
            _undo_start(output, existing, earlier, top)
            if os.environ.get("HYDRA_FULL_ERROR") == "1":  # Hydra's switch for the traceback
                raise
            error_line(_unstarted(exc))
            return EXIT_USAGE
        finally:
            lock.release()


def _interrupted(output: Path, terminated: bool) -> int:
    """Ctrl-C or SIGTERM: one line saying what is kept and how to resume."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # a second one must not cut this short
        signal.signal(signum, signal.SIG_IGN)
    how = "terminated (SIGTERM)" if terminated else "interrupted"
    error_line(f"{how}: {recorded_trials(output)} trials recorded in {output}; run the same "
               f"command again to resume (from another folder: add "
               f"{shlex.quote(f'output={output}')})")
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def _rerun_line(values: list[dict[str, Any]]) -> None:
    """What this sweep ran again of the trials earlier runs recorded, and where those are."""
    whys = [why for v in values for why in v.get(RERUN) or ()]
    if whys:
        console().print(f"re-ran {len(whys)} recorded trial(s) ({escape(rerun_what(whys))}); "
                        "each earlier attempt is kept in its trial folder, under "
                        "attempts/<n>/")


def _finish(output: Path, run: str, allow_failures: bool, received: list[int]) -> int:
    """The matrix, the reports and the summary; the run marked finished. Interrupted here, the
    run stays unfinished: the same command resumes it, runs nothing and writes them."""
    from aorta_core.app.run_folder import mark_finished
    from aorta_core.app.summary import finish

    try:
        result = finish(output)
    except Exception as exc:  # the records are safe; only the merge failed
        if received:  # a SIGTERM a library turned into its own exception
            raise
        mark_finished(output, run, None)
        error_line(f"could not write the matrix of {output} ({exception_line(exc)}); "
                   f"the trial records are kept: fix the cause, then run aorta matrix {output}")
        return EXIT_FAILED
    totals = Counter()
    for cell in result.cells:
        totals.update({k: v for k, v in cell["trials"].items() if k != "total"})
    mark_finished(output, run, dict(totals))
    return status_of(result.cells, allow_failures)
