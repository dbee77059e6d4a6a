"""One comparable key per kernel name, whichever profiler printed it.

Kineto (torchprof), rocprofv3 and Nsight Compute print demangled C++ names
(``void cutlass::Kernel2<cfg>(cfg::Params)``); Proton prints the raw CUPTI name
(``_ZN7cutlass7Kernel2I3cfgEEvNT_6ParamsE``) for every kernel that is not Triton's; ROCm Kineto
traces add a ``.kd`` suffix. Mangled names are demangled with the C++ runtime's own
``__cxa_demangle`` (the call Kineto makes), so both spellings become the same text; then the
return type, the argument list and ``(anonymous namespace)`` are dropped, whitespace removed and
the rest lowercased. Template arguments stay in the key: ``Kernel2<tile A>`` and
``Kernel2<tile B>`` are different kernels, and merging them would make a match that is not one.
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Callable

_SUFFIXES = (" [clone .kd]", ".kd")
_ANONYMOUS = "(anonymous namespace)::"
_OPEN, _CLOSE = "<({[", ">)}]"
#: Longer names are not demangled: real kernels stay far below, and the runtime's demangler is
#: recursive, so an absurd input is better left as it is.
_MAX_MANGLED = 4096
_RUNTIMES = ("libstdc++.so.6", "libc++abi.so.1", "libc++abi.dylib")


@functools.cache
def _demangler() -> Callable[[str], str | None] | None:
    """``__cxa_demangle`` of the C++ runtime torch already loads; ``None`` when there is none."""
    for library in _RUNTIMES:
        try:
            runtime, libc = ctypes.CDLL(library), ctypes.CDLL(None)
            cxa = runtime.__cxa_demangle
        except (OSError, AttributeError):
            continue
        cxa.restype = ctypes.c_void_p
        cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.POINTER(ctypes.c_int)]
        libc.free.argtypes = [ctypes.c_void_p]

        def demangle(name: str, cxa=cxa, free=libc.free) -> str | None:
            status = ctypes.c_int()
            pointer = cxa(name.encode(), None, None, ctypes.byref(status))
            if status.value != 0 or not pointer:
                return None
            try:
                return ctypes.string_at(pointer).decode("utf-8", "replace")
            finally:
                free(pointer)

        return demangle
    return None


def demangle(name: str) -> str:
    """The demangled name of an Itanium-mangled ``name`` (``_Z...``); any other name as is."""
    demangler = _demangler()
    if name.startswith("_Z") and len(name) <= _MAX_MANGLED and demangler is not None:
        return demangler(name) or name
    return name


def _depths(text: str) -> list[int]:
    """Bracket depth at each character (never below 0: ``operator>`` must not break it)."""
    depth, out = 0, []
    for char in text:
        if char in _CLOSE:
            depth = max(depth - 1, 0)
        out.append(depth)
        if char in _OPEN:
            depth += 1
    return out


def signature(name: str) -> str:
    """The kernel's qualified name with template arguments, no return type, no arguments."""
    text = name.strip()
    for suffix in _SUFFIXES:
        text = text.removesuffix(suffix)
    text = demangle(text).replace(_ANONYMOUS, "")
    depths = _depths(text)
    if text.endswith(")"):
        opening = max((i for i, c in enumerate(text) if c == "(" and depths[i] == depths[-1]),
                      default=len(text))
        text, depths = text[:opening].rstrip(), depths[:opening]
    spaces = [i for i, c in enumerate(text) if c == " " and depths[i] == 0]
    return text[spaces[-1] + 1:] if spaces else text


def kernel_key(name: str) -> str:
    """What two names must share to be the same kernel."""
    return re.sub(r"\s+", "", signature(name)).lower()

