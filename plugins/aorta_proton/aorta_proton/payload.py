"""Proton inside the payload, for ``collector.proton.mode: env``.

aorta leaves the command alone and exports ``AORTA_PROTON_*``. A workload that opens
``aorta_core.payload.session`` gets Proton on rank 0 through :func:`payload_session` (the
collector's ``payload_session`` hook). Without aorta_core, call the helpers directly (on one rank)::

    from aorta_proton import payload
    payload.start()      # False, and nothing happens, outside an aorta proton trial
    ...                  # GPU work
    payload.finalize()   # also runs at exit if the payload forgets

When Proton fails to start, the reason is written to :data:`START_FAILED` in the artifact folder
before the error goes on, so that the trial's record says why nothing was measured (the
collector's ``collect_artifacts`` reads it) whether or not the payload survives it.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Mapping
from typing import Any

from aorta_proton import session

#: The file in the artifact folder that says why Proton failed to start (one line).
START_FAILED = "start-failed.txt"

_started = False


def payload_session(rank: int, env: Mapping[str, str], context: Mapping[str, Any]
                    ) -> _Session | None:
    """Rank 0 of a ``mode: env`` trial profiles (one profile per trial); others run nothing."""
    if rank != 0 or not env.get("AORTA_PROTON_NAME"):
        return None
    return _Session(env)


class _Session:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def start(self) -> None:
        start(self.env)

    def step(self) -> None:
        pass

    def stop(self) -> None:
        finalize()


def start(env: Mapping[str, str] | None = None) -> bool:
    """Start Proton from the ``AORTA_PROTON_*`` variables; ``False`` when they are absent."""
    global _started
    env = os.environ if env is None else env
    name = env.get("AORTA_PROTON_NAME")
    if not name:
        return False
    if _started:
        return True
    folder = env.get("AORTA_PROTON_DIR") or os.path.dirname(os.path.abspath(name))
    os.makedirs(folder, exist_ok=True)
    try:
        session.start(
            name,
            context=env.get("AORTA_PROTON_CONTEXT", "shadow"),
            data=env.get("AORTA_PROTON_DATA", "tree"),
            backend=env.get("AORTA_PROTON_BACKEND"),
            mode=env.get("AORTA_PROTON_MODE"),
            hook=env.get("AORTA_PROTON_HOOK"),
            exclusive=False,
        )
    except Exception as exc:
        said = " ".join(str(exc).split())
        with open(os.path.join(folder, START_FAILED), "w") as out:
            out.write(f"{type(exc).__name__}: {said}\n" if said else f"{type(exc).__name__}\n")
        raise
    _started = True
    atexit.register(finalize)
    return True


def finalize() -> None:
    """Write the profile; a no-op when :func:`start` did not start one (safe to call twice)."""
    global _started
    if not _started:
        return
    _started = False
    atexit.unregister(finalize)
    session.finalize()
