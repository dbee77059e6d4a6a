"""Map a function over files in worker processes, within the machine's cores and memory.

An 8-GPU node writes eight 0.2-2 GB traces per profiled window: parsed one after another in one
process they take eight times as long as one, and a process that decodes them all holds them
all. :func:`parallel_map` runs ``fn(item)`` for each item in its own worker process, so the
parent only ever holds what ``fn`` returns (keep it small: metrics, partial sums, never decoded
events), and a file that exhausts memory costs that file, never the caller:

- workers: at most the items, the usable cores and ``AORTA_WORKERS``; items whose estimated
  memory (``need``) would not fit next to those in flight wait, and one that cannot fit even
  alone is refused before it starts (no OOM kill of the sweep);
- a ``MemoryError`` (``ulimit -v``), any exception, or a worker killed outright (the kernel's
  OOM killer, a native abort) becomes that item's :attr:`Mapped.error`; the other items go on;
- workers start with ``forkserver`` (``spawn`` where there is none), never ``fork``: the parent
  may run threads (the console's, polars'), and forking those can deadlock; but in a process
  forked from it (a collector hook's call, :mod:`aorta_core.engine.isolation`), which runs one
  thread, workers fork from it: quick, and ended with it when the hook is killed (a server of
  its own would cost each call an interpreter's start, and outlive it);
- one item or one worker: the call runs in this process, with no start-up cost;
- warnings ``fn`` emits in a worker are re-emitted here, so ``warnings.catch_warnings`` around
  the call (a collector hook's isolation) records them as if ``fn`` had run in-process;
- workers get the caller's environment as it is at the call, so the read limit
  (``AORTA_READ_LIMIT_MB``) holds there too;
- with ``AORTA_SLURM`` set, each item is a task of a Slurm job array instead
  (:mod:`aorta_core.api.slurm_map`), for traces one host cannot hold;
- inside :func:`shared_workers` (a command that maps several times, e.g. every trial's
  traces), the calls share one pool: its workers start once, keep the modules ``fn`` imported,
  and end when the block does; outside it each call starts and ends its own. A block stopped
  by Ctrl-C or SIGTERM ends the workers of every pool its calls used, also those another
  thread was starting, and that thread starts no worker after it. A forked process inherits
  no pool, block or lock state (:func:`_forget_the_parents`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aorta_core.api.item_call import Mapped, available_memory, call, run
from aorta_core.api.slurm_map import SLURM_ENV, settings_from_env, slurm_map

if TYPE_CHECKING:  # multiprocessing and concurrent.futures load with the first pool: every
    import multiprocessing.context  # aorta command imports this module, few start a pool
    from concurrent.futures import Future, ProcessPoolExecutor

#: Caps the worker processes of every :func:`parallel_map` (e.g. ``1`` on a shared login node).
WORKERS_ENV = "AORTA_WORKERS"
_MIB = 1 << 20

T = TypeVar("T")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, so a cgroup cpuset counts)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def decoded_bytes(path: Path) -> int:
    """What reading ``path`` yields: its size, or for ``.gz`` the size gzip records (mod 4 GiB,
    so never less than the compressed size)."""
    size = os.stat(path).st_size
    if not path.name.endswith(".gz") or size < 4:
        return size
    try:
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return max(int.from_bytes(fh.read(4), "little"), size)
    except OSError:
        return size


def _workers(items: int, wanted: int | None) -> int:
    cap = usable_cores() if wanted is None else wanted
    setting = os.environ.get(WORKERS_ENV, "")
    if setting.isdigit():
        cap = min(cap, int(setting))
    return max(min(items, cap), 1)


def _module_of(fn: Callable[[Any], Any]) -> str | None:
    """The module ``fn`` (or the function of a ``functools.partial``) is defined in."""
    return getattr(getattr(fn, "func", fn), "__module__", None)


def _context(fn: Callable[[Any], Any]) -> multiprocessing.context.BaseContext:
    """``forkserver`` where there is one, preloading ``fn``'s module (not, as by default, the
    main script: :func:`_main_left_behind`): the first pool starts the server, later workers
    fork from it with those imports done (a few ms instead of ~0.2 s each)."""
    import multiprocessing

    if _forked:
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    module = _module_of(fn)
    context.set_forkserver_preload([module] if module else [])
    return context


def prestart(*modules: str, min_cores: int = 3) -> None:
    """Start the worker server now, in the background, importing ``modules`` there: a command
    that will map over files calls it first, so the server's start (an interpreter and its
    imports: 0.1 s here, 0.5 s where bytecode is not cached) overlaps the command's own instead
    of delaying its first workers. Only where ``min_cores`` are usable: on two, the server and
    its resource tracker starting beside the command cost a one-file parse more (~45 ms) than
    they save a parse of several (~35 ms); a server that imports numpy (the diagnosis's) saves
    more than that on two (8 ranks: 0.04-0.12 s) and costs one rank 0.03 s. Nothing where no
    pool can start (``AORTA_WORKERS=1``, no forkserver)."""
    if _workers(2, None) < 2 or usable_cores() < min_cores:
        return  # before importing multiprocessing (and its socket, pickle: ~4 ms)
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(modules))
    _start_server(context)


def _start_server(context: multiprocessing.context.BaseContext) -> None:
    """Start the worker server (where the context has one) with SIGINT blocked: Ctrl-C reaches
    the terminal's whole process group, and a server still starting its interpreter died of it
    with a "Fatal Python error: init_sys_streams" (1 run in 30 in a review's test). Once up,
    the server ignores SIGINT, and its workers inherit the blocked mask until they ignore it
    too."""
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _start_worker(environ: dict[str, str]) -> None:
    """Take the caller's environment (the forkserver kept the one it started with, and the read
    limit may have changed since); ignore Ctrl-C, which reaches the whole process group: the
    caller decides, and ends the workers."""
    os.environ.clear()
    os.environ.update(environ)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Inside :func:`shared_workers`: the pool kept for the block's calls (``None`` until the
#: first starts one); ``_SHARED_OFF`` outside any block.
_SHARED_OFF = object()
_shared: Any = _SHARED_OFF
#: Inside a block: every pool its calls use and have not shut down (the shared one, and the
#: one-worker pools that follow a worker's death), all ended when the block is interrupted.
_block_pools: set[Any] = set()
#: The threads that ran when a block was interrupted (Ctrl-C, SIGTERM): the command is ending,
#: and none of them (a collector hook's, still mapping) may start a worker any more.
_stopped_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
#: Held while a pool is chosen or a worker may start (inside ``pool.submit``), and while an
#: interrupted block ends its pools: a worker is forked before its pool knows it, and one forked
#: in that gap (or in a pool made as the block ended) was never ended; this process's exit then
#: removed the semaphore it was still reading, and it printed a traceback after the command's
#: one line (on 16 cores every time). Reentrant: a generator of this module closed by the
#: garbage collector inside the lock takes it again.
_lock = threading.RLock()
#: The queues of a pool ended by an interruption, kept so that this process's exit removes
#: their semaphores, in its main thread: dropped last by a hook's thread still unwinding as
#: the process ended, one was removed but never struck off the resource tracker's list, which
#: then warned of a leak (one run in 300).
_kept_until_exit: list[Any] = []


#: This process was forked from one that imported this module: its workers fork from it.
_forked = False
#: In a forked process: the parent's pools and block, kept and never used (freeing them here
#: would run their finalizers, which unlink the parent's semaphores).
_the_parents: list[Any] = []


def _forget_the_parents() -> None:
    """After a fork, in the child: no pool or block of the parent's carries over, and the lock
    and held signals start free (another of the parent's threads may have held them)."""
    global _forked, _shared, _block_pools, _stopped_threads, _lock, _held
    _the_parents.append((_shared, _block_pools, _stopped_threads, _lock))
    _forked, _shared, _block_pools, _held = True, _SHARED_OFF, set(), None
    _stopped_threads, _lock = weakref.WeakSet(), threading.RLock()


os.register_at_fork(after_in_child=_forget_the_parents)


@contextmanager
def shared_workers() -> Iterator[None]:
    """Within the block, :func:`parallel_map` calls share one pool of worker processes: started
    by the first call that needs workers, with their imports done once per worker, and ended
    when the block ends. The memory plan is per call as ever (the pool's idle workers hold
    little; each call measures what is available when it starts). Nested blocks share the
    outer one's pool."""
    global _shared
    if _shared is not _SHARED_OFF:
        yield
        return
    _shared = None
    try:
        yield
    except BaseException as exc:  # Ctrl-C, SIGTERM: the call using the pools may run in another
        _end_block(stopping=isinstance(exc, KeyboardInterrupt))  # thread (a collector hook's)
        raise
    with _lock:
        pool, _shared = _shared, _SHARED_OFF
        _block_pools.clear()
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _main_left_behind(fn: Callable[[Any], Any]) -> Iterator[None]:
    """Workers start without the caller's main script unless ``fn`` lives there.
    multiprocessing runs the main script again in every worker it starts: one read from stdin
    (``python - <<EOF``, named ``<stdin>``) cannot be opened, and one without an
    ``if __name__ == "__main__"`` guard starts the map again, so every worker died; a guarded
    one still repeats the script's imports (torch: seconds) in each. The script is hidden from
    the workers while they start (inside ``submit``, in this thread)."""
    main = sys.modules.get("__main__")
    if main is None or _module_of(fn) == "__main__":
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None  # multiprocessing reads it, so it must be there
    try:
        yield
    finally:
        main.__dict__.update(saved)


def _new_pool(fn: Callable[[Any], Any], count: int) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor

    context = _context(fn)
    _start_server(context)
    return ProcessPoolExecutor(count, mp_context=context, initializer=_start_worker,
                               initargs=(dict(os.environ),))


def _pool(fn: Callable[[Any], Any], count: int, alone: bool) -> tuple[ProcessPoolExecutor, bool]:
    """A pool of ``count`` workers or more, and whether it is the shared one (kept at the end
    of the call). ``alone``: one-worker pools that find which item killed its worker."""
    global _shared
    with _lock:
        _refuse_if_stopping()
        if _shared is _SHARED_OFF:
            return _new_pool(fn, count), False
        if not alone and _shared is not None and _shared._max_workers < count:
            _shared.shutdown(wait=True)
            _block_pools.discard(_shared)
            _shared = None
        if alone or _shared is None:
            pool = _new_pool(fn, count)
            _block_pools.add(pool)
            if alone:
                return pool, False
            _shared = pool
        return _shared, True


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes now, whatever they are doing."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()


def _end_block(stopping: bool) -> None:
    """Once no worker is half-started (a start takes ~10 ms, the server's ~0.5 s; a second
    Ctrl-C stops the wait): end the workers of every pool of the block, and when the command is
    ``stopping`` refuse the other threads every later start (:func:`_refuse_if_stopping`)."""
    global _shared
    with _lock:
        pools, _shared = list(_block_pools), _SHARED_OFF
        _block_pools.clear()
        if stopping:
            _stopped_threads.update(t for t in threading.enumerate()
                                    if t is not threading.current_thread())
        for pool in pools:
            _kept_until_exit.append((pool._call_queue, pool._result_queue))
            _end_workers(pool)
            pool.shutdown(wait=False, cancel_futures=True)


def _refuse_if_stopping() -> None:
    if threading.current_thread() in _stopped_threads:
        raise RuntimeError("no worker process started: the command is stopping")


#: In the main thread's ``submit``: the signal that came meanwhile (``None`` outside one).
_held: list[int] | None = None


class _Holding:
    """SIGINT's or SIGTERM's handler during the main thread's ``submit``: the first signal waits
    for the submit's end, a second goes through at once (a server that never answers must not
    make Ctrl-C wait for ever). Outside a submit (left installed by a signal that came while the
    handlers were swapped back) it hands every signal on, as if it were not there."""

    def __init__(self, replaced: Any) -> None:
        self.replaced = replaced

    def __call__(self, signum: int, frame: Any) -> None:
        if _held == []:
            _held.append(signum)
        elif callable(self.replaced):
            self.replaced(signum, frame)
        else:  # SIG_DFL: what the signal does to a process without a handler
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)


@contextmanager
def _signals_held() -> Iterator[None]:
    """In the main thread, Ctrl-C and SIGTERM wait for the block's end (:class:`_Holding`):
    raised inside ``submit`` after the fork, they left a worker its pool did not know, so
    nothing ended it. Elsewhere (a hook's thread) no signal is raised, and :data:`_lock` keeps
    the ending out."""
    global _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced = {}
    _held = []
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)  # None: not set from Python, left alone
            if handler not in (None, signal.SIG_IGN) and not isinstance(handler, _Holding):
                signal.signal(signum, _Holding(handler))
                replaced[signum] = handler
        yield
    finally:
        held, _held = _held, None
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
        for signum in held:
            signal.raise_signal(signum)  # to the handler it would have met


def _forget(pool: ProcessPoolExecutor) -> None:
    """Forget a pool that was shut down (the shared one broke, or its call was interrupted):
    the next call starts one."""
    global _shared
    with _lock:
        _block_pools.discard(pool)
        if _shared is pool:
            _shared = None


def parallel_map(fn: Callable[[Any], T], items: Sequence[Any], *,
                 need: Callable[[Any], int] | None = None, workers: int | None = None
                 ) -> Iterator[Mapped[T]]:
    """``fn(item)`` for every item, yielded in the order of ``items``.

    ``fn`` must be a module-level function (or a ``functools.partial`` of one) and items and
    values picklable. ``need(item)``: the bytes ``fn`` will hold at its peak (e.g. 2.5x
    :func:`decoded_bytes`); without it memory is not planned. ``workers``: at most this many
    processes (default: the usable cores).
    """
    items = list(items)
    needs = [need(item) if need else 0 for item in items]
    if os.environ.get(SLURM_ENV) is not None:  # each item a task of a Slurm job array
        yield from slurm_map(fn, items, needs, settings_from_env())
        return
    free = available_memory() if need else None
    count = _workers(len(items), workers)
    refused = {i for i, n in enumerate(needs) if free is not None and n > free}
    if count == 1:
        for i, item in enumerate(items):
            yield _refuse(item, needs[i], free) if i in refused else call(fn, item)
        return
    yield from _pooled(fn, items, needs, free, refused, count)


def _refuse(item: Any, need: int, free: int | None) -> Mapped:
    return Mapped(item, error=f"needs about {need / _MIB:.0f} MiB of memory, "
                              f"{(free or 0) / _MIB:.0f} MiB available; not attempted",
                  memory=True)


def _pooled(fn: Callable[[Any], T], items: list[Any], needs: list[int], free: int | None,
            refused: set[int], count: int) -> Iterator[Mapped[T]]:
    """Schedule on a pool, at most ``count`` items and ``free`` bytes in flight. A pool broken
    by a dead worker is replaced by one-worker pools for what was left, so the item that dies
    alone is the one that gets the error."""
    from concurrent.futures.process import BrokenProcessPool

    pending = [i for i in range(len(items)) if i not in refused]
    done: dict[int, Mapped[T]] = {i: _refuse(items[i], needs[i], free) for i in refused}
    emitted, alone, environ = 0, False, dict(os.environ)
    while pending:
        pool, shared = _pool(fn, count, alone)
        running: dict[int, Future] = {}
        try:
            while pending or running:
                while pending and len(running) < count and (not running or free is None or sum(
                        needs[i] for i in running) + needs[pending[0]] <= free):
                    i = pending[0]  # taken off only once submitted: a pool that broke
                    running[i] = _submit(pool, fn, items[i], environ)  # raises here
                    pending.pop(0)
                finished = _wait_one(pool, running)
                done[finished], caught = running[finished].result()  # raises if it died
                del running[finished]
                for category, message in caught:
                    warnings.warn(message, category, stacklevel=2)
                while emitted in done:
                    yield done.pop(emitted)
                    emitted += 1
        except BrokenProcessPool:
            if shared and _shared is _SHARED_OFF:  # its block ended it (Ctrl-C): stop, no retry
                raise
            shared = False
            _end_workers(pool)  # with any a racing submit started: see _submit
            if alone:  # it died alone: that item is the culprit
                culprit = min(running)
                done[culprit] = Mapped(items[culprit], error="its worker process died (killed "
                                       "by the system, e.g. out of memory, or a native crash)",
                                       memory=True)
                running.pop(culprit)
            pending, count, alone = sorted([*running, *pending]), 1, True
        except BaseException:  # Ctrl-C or the caller stopped early: end the workers now
            shared = False
            _end_workers(pool)
            raise
        finally:
            if not shared:  # (a broken or interrupted shared pool too: the next call starts one)
                pool.shutdown(wait=True, cancel_futures=True)
                _forget(pool)
    while emitted in done:
        yield done.pop(emitted)
        emitted += 1


def _submit(pool: ProcessPoolExecutor, fn: Callable[[Any], T], item: Any,
            environ: dict[str, str]) -> Future:
    """``fn(item)`` submitted to ``pool``; ``BrokenProcessPool`` if it broke meanwhile.

    The pool breaks in its own thread, racing this one. What that race does in CPython 3.11-3.13:
    a submit that began before the break may start a worker (forkserver pools start them on
    submit) after the pool terminated the ones it knew, and then the pool's shutdown joins that
    live worker forever (a CI run hung so): the caller ends every worker of a broken pool
    (:func:`_end_workers`) before shutting it down. The submit may instead fail to start that
    worker (the pool closed the queue it would read: ``OSError``) or find the pool shut down but
    not yet marked broken (``RuntimeError``), or add its item after the pool failed those it
    held, so that its future never resolves (:func:`_wait_one` looks at the pool's state)."""
    try:
        with _lock, _signals_held(), _main_left_behind(fn):  # a worker may start in submit
            _refuse_if_stopping()
            return pool.submit(run, fn, item, environ)
    except Exception:
        _raise_if_broken(pool)
        raise


def _raise_if_broken(pool: ProcessPoolExecutor) -> None:
    from concurrent.futures.process import BrokenProcessPool

    if getattr(pool, "_broken", False):
        raise BrokenProcessPool(pool._broken)


#: How often :func:`_wait_one` looks whether the pool broke without failing the futures it waits
#: for (rare: a race with a submit); an item's end is seen at once, whatever this is.
_BROKEN_POLL_S = 1.0


def _wait_one(pool: ProcessPoolExecutor, running: dict[int, Future]) -> int:
    """The index of a finished future (waiting for one); ``BrokenProcessPool`` where the pool
    broke and none of them will ever finish."""
    from concurrent.futures import FIRST_COMPLETED, wait

    while True:
        finished = wait(running.values(), timeout=_BROKEN_POLL_S, return_when=FIRST_COMPLETED)[0]
        if finished:
            first = next(iter(finished))
            return next(i for i, f in running.items() if f is first)
        _raise_if_broken(pool)
        _wake_if_a_worker_died(pool)


def _wake_if_a_worker_died(pool: ProcessPoolExecutor) -> None:
    """Wake the pool's manager thread where one of its workers has exited. CPython 3.11-3.13's
    ``submit`` wakes that thread before it starts the new worker, so the thread may wait on the
    other workers only; a new worker that dies before anything else wakes it (a result, a
    submit) went unseen, and the pool broke only when another item ended: 60 s later in a test
    whose other item ran a minute (about 1 run in 4 with cold caches). Woken, the thread looks at
    every worker again and breaks the pool."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    if not any(w.exitcode is not None for w in workers):
        return
    # OSError, ValueError: the pipe is closed, the pool shutting down: nothing to wake
    with pool._shutdown_lock, suppress(OSError, ValueError):
        pool._executor_manager_thread_wakeup.wakeup()
