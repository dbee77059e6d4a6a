"""Collectors inside the payload: the one call a workload makes so that they measure it from within.

::

    from aorta_core import payload

    with payload.session(rank) as s:    # nothing runs outside an aorta trial
        for batch in data:
            train_step(batch)
            s.step()                    # one iteration ended

Every installed collector (``aorta.collectors``) is asked through its ``payload_session`` hook
for a session, an object with ``start()``, ``step()`` and ``stop()``, or ``None`` when it has
nothing to do in this process: its ``wrap_argv`` did not select it for this trial (its variables
are absent from ``env``) and the workload did not ask for it in ``context``. Collector modules are
imported one by one and must be cheap to import; a profiler is imported in ``start()``.

Sessions start in name order and stop in reverse. A collector that fails to load, or a session
that fails to start, step or stop, costs only itself: one warning, and the workload goes on
without it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from aorta_core.api.contracts import PayloadSession
from aorta_core.api.oneline import exception_line
from aorta_core.api.ranks import rank_from_env

if TYPE_CHECKING:
    from aorta_core.engine.plugins import Registry

_FAILED = object()


class Session:
    """The workload's handle on every collector session that runs in this process."""

    def __init__(self) -> None:
        self._running: list[tuple[str, PayloadSession]] = []

    @property
    def names(self) -> tuple[str, ...]:
        """The collectors whose sessions run, in start order."""
        return tuple(name for name, _ in self._running)

    def step(self) -> None:
        """Tell every session that one iteration (training step) of the workload ended."""
        for name, running in list(self._running):
            if _isolated(name, "step", running.step) is _FAILED:
                self._running.remove((name, running))
                _isolated(name, "stop", running.stop)


@contextmanager
def session(rank: int | None = None, **context: Any) -> Iterator[Session]:
    """Start the collector sessions selected for this process; stop them when the block ends.

    ``rank``: the process's global rank (default: ``$RANK``, else 0). ``context``: what the
    workload tells collectors about itself, passed to every ``payload_session`` hook
    (``output_dir``, or a request such as torchprof's ``torch_profiler``); a collector ignores
    keys it does not know.
    """
    env = dict(os.environ)
    rank = rank_from_env(env) if rank is None else rank
    handle = Session()
    try:
        for name, collector in _collectors():
            made = _isolated(name, "payload_session", collector.call, name, "payload_session",
                             rank=rank, env=env, context=context)
            if made is not None and made is not _FAILED \
                    and _isolated(name, "start", made.start) is not _FAILED:
                handle._running.append((name, made))
        yield handle
    finally:
        for name, running in reversed(handle._running):
            _isolated(name, "stop", running.stop)
        handle._running.clear()


def _collectors() -> Iterator[tuple[str, Registry]]:
    """The installed collectors by name, each imported on its own (a failure warns), with the
    registry that calls their hooks. Not the sweep's registry: the workload needs none of the
    checks that one runs on load."""
    import pluggy
    from importlib_metadata import entry_points

    from aorta_core.api import hookspecs
    from aorta_core.engine.plugins import ENTRY_POINT_GROUP, Registry, skipped

    manager = pluggy.PluginManager("aorta")
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager)
    seen: set[str] = set()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in seen or skipped(ep.name):
            continue
        seen.add(ep.name)
        if _isolated(ep.name, "load", _register, manager, ep) is not _FAILED:
            yield ep.name, registry


def _register(manager: Any, ep: Any) -> None:
    manager.register(ep.load(), name=ep.name)


def _isolated(name: str, what: str, call: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or ``_FAILED`` with one warning: never the workload's error."""
    try:
        return call(*args, **kwargs)
    except (Exception, SystemExit) as exc:
        warnings.warn(
            f"aorta payload: collector {name!r} session failed at {what} "
            f"({exception_line(exc)}); the workload goes on without it",
            stacklevel=_workload_level(),
        )
        return _FAILED


def _workload_level() -> int:
    """The ``stacklevel`` that names the workload's line, not this module's or contextlib's."""
    frame, level = sys._getframe(2), 2
    while frame.f_back is not None and frame.f_globals.get("__name__") in (__name__, "contextlib"):
        frame, level = frame.f_back, level + 1
    return level
