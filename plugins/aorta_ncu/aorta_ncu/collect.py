"""After the run: keep ncu's console lines and export the raw page, so parsing needs no ncu.

ncu prints its own lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``) into the same streams as
the command's output; they are copied to ``console.txt`` beside the report so that ``aorta parse``
can explain an empty report later. ``raw.csv`` is ``ncu --import report.ncu-rep --csv --page raw``:
one row per profiled launch. It keeps ncu's default (auto-scaled) units, converted by the units
row when parsed: ``--print-units base`` rounds every percentage to 2 decimals (seen with ncu
2025.3.1; ``tests/fixtures/h200/mm_basic.raw*.csv`` are both exports of one report), auto keeps 6.
"""

from __future__ import annotations

import os
import re
import subprocess
import warnings
from pathlib import Path
from typing import BinaryIO

from aorta_core.api import SetupError, TrialRun, open_limited
from aorta_ncu.options import NcuOptions
from aorta_ncu.wrap import REPORT_STEM, resolve_binary

REPORT = f"{REPORT_STEM}.ncu-rep"
RAW = "raw.csv"
CONSOLE = "console.txt"
#: Below the core's per-hook limit (hook_timeout, 300 s by default): a report that takes longer
#: to export costs raw.csv with a warning, and can be exported by hand later.
IMPORT_TIMEOUT_S = 240
_NCU_LINE = re.compile(r"^==(PROF|WARNING|ERROR|INFO)== ")


def console_lines(*logs: Path) -> list[str]:
    """ncu's own lines from the trial's stdout and stderr, in order per stream, read through
    aorta's bounded reader (a log the payload swapped for a FIFO or a link out is skipped)."""
    lines = []
    for log in logs:
        try:
            with open_limited(log, log.parent) as fh:
                lines += [text.rstrip("\n") for text in
                          (line.decode(errors="replace") for line in fh) if _NCU_LINE.match(text)]
        except FileNotFoundError:
            continue
        except OSError as exc:
            warnings.warn(f"ncu: {exc}; ncu's lines in it are not kept", stacklevel=2)
    return lines


def _fresh(path: Path) -> BinaryIO:
    """``path`` opened for writing as a new file: whatever the payload left there (a link out
    of the folder, a FIFO) is removed, never written through."""
    path.unlink(missing_ok=True)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666),
                     "wb")


def export_raw(binary: str, report: Path, raw: Path) -> None:
    """``ncu --import <report> --csv --page raw > raw.csv``; warns on failure."""
    argv = [binary, "--import", str(report), "--csv", "--page", "raw"]
    try:
        with _fresh(raw) as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, timeout=IMPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if not raw.is_dir():
            raw.unlink(missing_ok=True)
        warnings.warn(f"ncu: cannot export {report.name} to {RAW}: {exc}", stacklevel=2)
        return
    if done.returncode != 0:
        raw.unlink(missing_ok=True)
        last = (done.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
        warnings.warn(f"ncu: --import of {report.name} failed (exit {done.returncode}): {last}",
                      stacklevel=2)


def collect(artifact_dir: Path, options: NcuOptions, run: TrialRun) -> list[Path]:
    """Write ``console.txt`` and ``raw.csv`` next to ``report.ncu-rep``; list the folder."""
    lines = console_lines(run.stdout_path, run.stderr_path)
    if lines:
        try:
            with _fresh(artifact_dir / CONSOLE) as out:
                out.write(("\n".join(lines) + "\n").encode())
        except OSError as exc:
            warnings.warn(f"ncu: cannot write {CONSOLE}: {exc}", stacklevel=2)
    report = artifact_dir / REPORT
    if report.is_file():
        try:
            binary = resolve_binary(options, run.launch.env)
        except SetupError as exc:
            warnings.warn(f"ncu: cannot export {REPORT} to {RAW}: {exc}", stacklevel=2)
        else:
            export_raw(binary, report, artifact_dir / RAW)
    return sorted(p for p in artifact_dir.iterdir() if p.is_file())
