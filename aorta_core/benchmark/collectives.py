"""Run-time patching of ``torch.distributed`` collectives onto the timeline's streams.

FSDP2 calls ``dist.all_gather_single`` / ``dist.reduce_scatter_single`` (torch >= 2.13; older
torch: ``all_gather_into_tensor`` / ``reduce_scatter_tensor``) and DDP's bucket all-reduce goes
through our comm hook's ``dist.all_reduce``: replacing these module attributes is enough to
time every collective the workload issues. A thread-local guard keeps the deprecated aliases,
which call the new names, from being recorded twice.
"""

import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

#: Collective kind -> function names patched (whichever exist in this torch).
PATCHED = {
    "allreduce": ("all_reduce",),
    "reducescatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
    "allgather": ("all_gather_single", "all_gather_into_tensor"),
}

_inside = threading.local()


def _nbytes(args: dict[str, Any]) -> int:
    for value in args.values():
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size()
    return 0


def _wrap(kind: str, name: str, original: Callable[..., Any], timeline: Any,
          counts: dict[str, int]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def patched(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "active", False):
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        caller_async = bool(bound.arguments.get("async_op", False))
        bound.arguments["async_op"] = True
        metadata = {"function": name, "bytes": _nbytes(bound.arguments)}
        counts[kind] = counts.get(kind, 0) + 1
        _inside.active = True
        try:
            work, stream = timeline.collective(
                kind, name, metadata, lambda: original(*bound.args, **bound.kwargs)
            )
        finally:
            _inside.active = False
        if caller_async:
            return work
        if stream is not None:
            torch.cuda.current_stream(stream.device).wait_stream(stream)
        elif work is not None:
            work.wait()
        return None

    return patched


@contextmanager
def replaced(names: Iterable[str], replace: Callable[[str, Callable[..., Any]], Callable[..., Any]]
             ) -> Iterator[None]:
    """While the block runs, each of ``names`` that c10d has is ``replace(name, current)`` in
    ``torch.distributed`` and c10d alike (where each holds that same function)."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for name in names:
            original = getattr(c10d, name, None)
            if original is None:
                continue
            replacement = replace(name, original)
            for module in (dist, c10d):
                if getattr(module, name, None) is original:
                    saved.append((module, name, original))
                    setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in reversed(saved):
            setattr(module, name, original)


@contextmanager
def patched_collectives(timeline: Any, counts: dict[str, int]) -> Iterator[None]:
    """Route the collectives through ``timeline.collective`` while the block runs."""
    kinds = {name: kind for kind, names in PATCHED.items() for name in names}
    with replaced(kinds, lambda name, original: _wrap(kinds[name], name, original, timeline,
                                                       counts)):
        yield


def ddp_allreduce_hook(process_group: dist.ProcessGroup | None, bucket: dist.GradBucket
                       ) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook equal to the built-in all-reduce, but through ``dist.all_reduce``.

    DDP's reducer calls the process group from C++, invisible to Python patching; routing the
    buckets through this hook makes them timed collectives like FSDP's. (No postponed
    annotations in this module: DDP checks the hook's annotations at registration.)
    """
    group = process_group or c10d._get_default_group()
    tensor = bucket.buffer().div_(group.size())
    work = dist.all_reduce(tensor, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])
