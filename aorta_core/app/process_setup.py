"""What aorta's own process needs of where it is started, settled before anything else runs:
text in UTF-8 whatever the locale, and enough address space for its libraries.

aorta's files (records, the matrix, the reports) are UTF-8 and name folders as they are. Under
an ASCII or Latin-1 locale with Python's UTF-8 mode off (``LC_ALL=C PYTHONUTF8=0``), a folder
named ``ü`` arrives as undecodable bytes and a line with ``≥`` cannot be printed: the process
starts itself again with ``-X utf8`` (the workload's environment is untouched). Under an
address-space limit (``ulimit -v``) too small for polars and its threads, polars aborts the
process (Rust's allocation failure) where no error can be caught: aorta says so first, in one
line.
"""

from __future__ import annotations

import os
import resource
import sys

#: Address space aorta needs: measured on a 2-core VM (2026-12-06), a sweep and its matrix ran
#: in 4 of 4 tries under ``ulimit -v`` 1000 MiB and 3 of 4 under 800 MiB (polars reserves a
#: thread and its arena per core); the margin per core covers larger machines.
BASE_ADDRESS_SPACE_MIB = 1024
PER_CORE_ADDRESS_SPACE_MIB = 32


def _utf8_again() -> None:
    """Run again in UTF-8 mode when the locale would make aorta's text something else."""
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8":
        return
    if not sys.executable or not getattr(sys, "orig_argv", None):
        return  # nothing to start again with: go on as the locale says
    sys.stdout and sys.stdout.flush()
    sys.stderr and sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]])


def needed_address_space_mib() -> int:
    return BASE_ADDRESS_SPACE_MIB + PER_CORE_ADDRESS_SPACE_MIB * (os.cpu_count() or 1)


def _address_space_problem() -> str | None:
    """Why the address-space limit is too small (its soft limit raised to the hard one first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    need = needed_address_space_mib()
    if soft == resource.RLIM_INFINITY or soft >= need << 20:
        return None
    return (f"the address-space limit (ulimit -v) is {soft >> 20} MiB, below the {need} MiB "
            "aorta needs here (polars reserves memory for a thread per core; past the limit it "
            f"aborts): raise it, e.g. ulimit -v {need << 10} (KiB) or ulimit -v unlimited")


def prepare() -> str | None:
    """Settle the process (it may start itself again); the one line that stops it, if any."""
    _utf8_again()
    return _address_space_problem()
