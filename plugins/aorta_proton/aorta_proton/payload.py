"""Helper for payloads run with ``collector.proton.mode: env``.

aorta leaves the command alone and exports ``AORTA_PROTON_*``; the payload calls :func:`start`
(on one rank) before its GPU work and :func:`finalize` after it::

    from aorta_proton import payload
    payload.start()      # False, and nothing happens, outside an aorta proton trial
    ...                  # GPU work
    payload.finalize()   # also runs at exit if the payload forgets
"""

from __future__ import annotations

import atexit
import os

from aorta_proton import session

_started = False


def start() -> bool:
    """Start Proton from the ``AORTA_PROTON_*`` variables; ``False`` when they are absent."""
    global _started
    name = os.environ.get("AORTA_PROTON_NAME")
    if not name:
        return False
    if _started:
        return True
    os.makedirs(
        os.environ.get("AORTA_PROTON_DIR") or os.path.dirname(os.path.abspath(name)), exist_ok=True
    )
    session.start(
        name,
        context=os.environ.get("AORTA_PROTON_CONTEXT", "shadow"),
        data=os.environ.get("AORTA_PROTON_DATA", "tree"),
        backend=os.environ.get("AORTA_PROTON_BACKEND"),
        mode=os.environ.get("AORTA_PROTON_MODE"),
        hook=os.environ.get("AORTA_PROTON_HOOK"),
        exclusive=False,
    )
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
