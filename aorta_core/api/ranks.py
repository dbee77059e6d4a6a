"""Which rank a process or a file belongs to: one reading for the core, the benchmark and every
collector (``aorta_core.api``)."""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path

from aorta_core.api.files import open_limited

_RANK_IN_NAME = re.compile(r"rank[_-]?(\d{1,9})(?!\d)", re.IGNORECASE)
#: A field of Kineto's ``distributedInfo`` (``rank``, ``world_size``); 1-9 digits: a longer run
#: is no rank or size.
_IN_HEAD = {field: re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"' + field.encode()
                              + rb'"\s*:\s*(\d{1,9})(?!\d)') for field in ("rank", "world_size")}
_HEAD_BYTES = 1 << 16


#: Where launchers put a process's rank, the first set wins: torchrun's (and most wrappers'),
#: then ``srun`` started without torchrun, Open MPI's ``mpirun``, MPICH and Intel MPI.
_LAUNCHERS = {
    "RANK": ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"),
    "LOCAL_RANK": ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "MPI_LOCALRANKID"),
}


def rank_from_env(env: Mapping[str, str] | None = None, variable: str = "RANK") -> int:
    """The rank a launcher exported for this process: ``RANK`` across the job (``LOCAL_RANK`` on
    its node) as torchrun sets it, else Slurm's, Open MPI's or MPICH's own variable for it (a
    workload started by ``srun`` or ``mpirun`` alone); 0 when none is set to a number (a single
    process)."""
    env = os.environ if env is None else env
    for name in _LAUNCHERS.get(variable, (variable,)):
        try:
            return int(env[name])
        except (KeyError, ValueError):
            continue
    return 0


def rank_from_name(path: Path) -> int:
    """``rank<R>`` (also ``rank_<R>``, ``rank-<R>``) in the file name, else in a parent
    folder's name, else 0."""
    for part in (path.name, *reversed(path.parent.parts)):
        found = _RANK_IN_NAME.search(part)
        if found:
            return int(found.group(1))
    return 0


def rank_in_head(path: Path, root: Path | None = None) -> int | None:
    """Kineto's ``distributedInfo.rank``, read from the first 64 KiB (Kineto writes it before
    the events), so a file's rank is known without decoding it all."""
    return _in_head(path, root, "rank")


def world_size_in_head(path: Path, root: Path | None = None) -> int | None:
    """Kineto's ``distributedInfo.world_size``, read as :func:`rank_in_head` reads the rank: how
    many ranks the job had, so that a rank with no trace is known to be missing."""
    return _in_head(path, root, "world_size")


def _in_head(path: Path, root: Path | None, field: str) -> int | None:
    try:
        with open_limited(path, root) as fh:
            head = fh.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    found = _IN_HEAD[field].search(head)
    return int(found.group(1)) if found else None
