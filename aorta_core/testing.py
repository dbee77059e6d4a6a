"""Real sweeps in a collector plugin's own tests, as pytest's ``pytester`` runs real pytest.

A plugin's ``conftest.py`` opts in with ``pytest_plugins = ["aorta_core.testing"]`` (it is not
registered as a ``pytest11`` entry point, so it never loads in anybody else's pytest); its tests
then get the :func:`aorta_sweep` fixture::

    def test_profiles_every_rank(aorta_sweep):
        result = aorta_sweep("sweep=repeat", "trials=1", "collector=mytool", "--",
                             sys.executable, "work.py", collectors=["mytool"])
        result.assert_ok()
        (record,) = result.records
        assert record.metrics["mytool_calls"] > 0

Each call runs ``python -m aorta_core <args>`` in a subprocess, exactly as a user would: the
collector is loaded from its installed distribution, its Hydra option composed, its hooks called
under the core's isolation and its metrics cleaned, so a test sees what a user's sweep records.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from aorta_core.engine.argv import split_command
from aorta_core.engine.matrix import scan
from aorta_core.engine.records import BadRecord, TrialRecord

#: Exit statuses of ``aorta`` (docs/sweeps.md), for the failure message.
_STATUS = {0: "all trials passed", 1: "a trial failed or a cell was refused", 2: "usage error",
           130: "interrupted", 143: "terminated"}
#: Lines of stderr a failure message ends with.
_STDERR_TAIL = 30
#: Seconds a sweep past its timeout gets to end its trials after SIGTERM, before SIGKILL.
_GRACE_S = 30


@dataclass(frozen=True)
class SweepResult:
    """One finished ``aorta`` run: what it printed, its exit status and the trial records it
    left under ``output`` (read and validated by :mod:`aorta_core.engine.records`)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    output: Path
    records: list[TrialRecord]
    #: Record files that exist but are not valid records (each names its path and problem).
    bad_records: list[BadRecord]
    timed_out: bool = False

    def assert_ok(self) -> SweepResult:
        """Raise ``AssertionError`` unless the sweep exited 0 with at least one trial, every one
        of them ``pass``; the message holds the command line, each failed trial's error and the
        end of stderr, which is what one needs to see in a CI log."""
        failed = [r for r in self.records if r.verdict != "pass"]
        if self.returncode == 0 and self.records and not failed and not self.bad_records:
            return self
        raise AssertionError(self.failure_message())

    def failure_message(self) -> str:
        if self.timed_out:
            status = f"did not end before its timeout; ended with exit status {self.returncode}"
        else:
            status = (f"exited {self.returncode} "
                      f"({_STATUS.get(self.returncode, 'unexpected status')})")
        lines = [f"aorta sweep {status}: {shlex.join(self.args)}",
                 f"output: {self.output} ({len(self.records)} trial "
                 f"record{'' if len(self.records) == 1 else 's'})"]
        lines += [f"  {r.cell} trial {r.trial}: {r.verdict}: {r.error or f'exit {r.exit_code}'}"
                  for r in self.records if r.verdict != "pass"]
        lines += [f"  bad record: {bad}" for bad in self.bad_records]
        tail = self.stderr.splitlines()[-_STDERR_TAIL:]
        lines += [f"stderr (last {len(tail)} lines):", *(f"  {line}" for line in tail)]
        return "\n".join(lines)


class SweepRunner:
    """The :func:`aorta_sweep` fixture's value: call it once per sweep."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._runs = 0

    def __call__(self, *args: str | os.PathLike, collectors: Iterable[str] | None = None,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 600) -> SweepResult:
        """Run ``aorta <args>`` (overrides, then ``--`` and the command) and wait for it.

        ``output=`` is added, a new folder under ``tmp_path``, unless ``args`` has one.
        ``collectors`` loads only those (``AORTA_LOAD_PLUGINS``), so that other collectors
        installed beside yours cannot change the result. ``env`` is added to this process's
        environment, in which ``AORTA_REPORT_PNG=0`` skips the report's PNG export (it starts a
        browser) unless ``env`` sets it. ``cwd`` defaults to ``tmp_path``. After ``timeout``
        seconds the sweep is ended as ``kill`` would end it (SIGTERM: its trials end too), and
        killed ``_GRACE_S`` seconds later if it is still running.
        """
        argv = [os.fspath(a) for a in args]
        cwd = cwd or self.tmp_path
        given = [a.partition("=")[2] for a in split_command(argv)[0] if a.startswith("output=")]
        output = cwd / given[-1] if given else None
        if output is None:
            self._runs += 1
            output = self.tmp_path / f"sweep-{self._runs}"
            argv.insert(0, f"output={output}")
        full_env = {**os.environ, "AORTA_REPORT_PNG": "0", **(env or {})}
        if collectors is not None:
            full_env["AORTA_LOAD_PLUGINS"] = ",".join(collectors)
        returncode, stdout, stderr, timed_out = _run(
            [sys.executable, "-m", "aorta_core", *argv], cwd, full_env, timeout)
        records: list[TrialRecord] = []
        bad: list[BadRecord] = []
        if (output / "cells").is_dir():  # a usage error (exit status 2) writes nothing
            _, records, bad = scan(output)
        return SweepResult(tuple(argv), returncode, stdout, stderr, output, records, bad,
                           timed_out)


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float
         ) -> tuple[int, str, str, bool]:
    """(exit status, stdout, stderr, timed out). A sweep past ``timeout`` gets SIGTERM, which
    it answers by ending its trials' process groups; SIGKILL would leave them running."""
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            return process.returncode, stdout, stderr, False
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                stdout, stderr = process.communicate(timeout=_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            return process.returncode, stdout, stderr, True


@pytest.fixture
def aorta_sweep(tmp_path: Path) -> SweepRunner:
    """Runs real ``aorta`` sweeps in ``tmp_path``; each call returns a :class:`SweepResult`."""
    return SweepRunner(tmp_path)
