"""Clock marks: Proton's trace on the wall clock, and a check of its clock.

Proton 3.6/3.7 times a ``data=trace`` trace from its first kernel, with no absolute anchor. A
mark is one tiny Triton kernel, :data:`MARK_KERNEL`, run with the device synchronized and
``time.time_ns()`` stamped on both sides: the kernel ran inside that window, so where the trace
puts it ties the trace's time to the wall clock within half the window. The session marks right
after Proton starts and right before it finalizes (the process's first mark runs the kernel
twice: that launch also compiles it, a wide but valid window); the core places the trace where
every mark fits its window (``TimelineSource.marks``), and the start and end marks, seconds
apart, check that Proton's clock ran at the wall clock's rate. Marks are made only in a process
that already uses the GPU (``torch.cuda.is_initialized()``): they never start CUDA in a process
that would not have. The mark kernels are left out of the kernel metrics.

Imports Triton and torch only when called, and nothing from aorta_core (it runs in the
workload's process).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

MARK_KERNEL = "aorta_clock_mark"
#: Beside ``<name>.chrome_trace``: one JSON line per mark.
MARKS_SUFFIX = ".marks.jsonl"

_kernel: Any = None
_counter: Any = None


def _mark_kernel() -> tuple[Any, Any]:
    """The kernel and its one int of device memory (``torch.empty``: allocating launches no
    kernel of its own into the profile)."""
    global _kernel, _counter
    if _kernel is None:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def aorta_clock_mark(counter):
            tl.store(counter, tl.load(counter) + 1)

        _kernel, _counter = aorta_clock_mark, torch.empty(1, dtype=torch.int32, device="cuda")
    return _kernel, _counter


def mark(name: str) -> bool:
    """Run the mark kernel (twice the first time in this process: that launch also compiles it,
    a wide window), each window appended to ``<name>.marks.jsonl``; ``False`` (nothing written)
    where this process does not use a GPU through torch or the kernel cannot run."""
    try:
        import torch

        if not torch.cuda.is_initialized():
            return False
        times = 1 if _kernel is not None else 2
        kernel, counter = _mark_kernel()
        windows = []
        for _ in range(times):
            torch.cuda.synchronize()
            before = time.time_ns()
            kernel[(1,)](counter)
            torch.cuda.synchronize()
            windows.append((before, time.time_ns()))
    except Exception:  # no torch, no device, no compiler: the trace is centred in its span
        return False
    with open(name + MARKS_SUFFIX, "a", encoding="utf-8") as out:
        for before, after in windows:
            out.write(json.dumps({"kernel": MARK_KERNEL, "not_before_unix_ns": before,
                                  "not_after_unix_ns": after}) + "\n")
    return True


def read_marks(trace_path: str | os.PathLike[str]) -> tuple[tuple[str, int, int], ...]:
    """The marks written beside ``<name>.chrome_trace``, as ``TimelineSource.marks`` takes
    them; none where the file is missing or a line is not a mark."""
    path = os.fspath(trace_path)
    marks_path = (path[:-len(".chrome_trace")] if path.endswith(".chrome_trace") else path) \
        + MARKS_SUFFIX
    out = []
    try:
        with open(marks_path, encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                found = json.loads(line)
                low, high = found["not_before_unix_ns"], found["not_after_unix_ns"]
                if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
                    return ()
                out.append((str(found["kernel"]), low, high))
    except (OSError, ValueError, KeyError, TypeError):
        return ()
    return tuple(out)
