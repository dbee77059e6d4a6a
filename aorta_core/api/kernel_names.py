"""One comparable key per kernel name, whichever profiler printed it.

Kineto (torchprof), rocprofv3 and Nsight Compute print demangled C++ names
(``void cutlass::Kernel2<cfg>(cfg::Params)``); Proton prints the raw CUPTI name
(``_ZN7cutlass7Kernel2I3cfgEEvNT_6ParamsE``) for every kernel that is not Triton's; ROCm Kineto
traces add a ``.kd`` suffix. Mangled names are demangled by the ``cxxfilt`` package (a binding of
the C++ runtime's ``__cxa_demangle``, the call Kineto makes), so both spellings become the same
text; then the return type, the argument list and ``(anonymous namespace)`` are dropped,
whitespace removed and the rest lowercased. Template arguments and tile shapes stay in the key by
default: ``Kernel2<tile A>`` and ``Kernel2<tile B>`` are different kernels, and merging them
would make a match that is not one; ``kernel_key(name, templates=False, tiles=False)`` collapses
both, to pair the same kernel across library versions that retuned it.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable

_SUFFIXES = (" [clone .kd]", ".kd")
_ANONYMOUS = "(anonymous namespace)::"
_OPEN, _CLOSE = "<({[", ">)}]"
#: Longer names are not demangled: real kernels stay far below, and the runtime's demangler is
#: recursive, so an absurd input is better left as it is.
_MAX_MANGLED = 4096
#: A tile shape in a kernel's name: ``128x128x64`` (cuBLAS/xmma), ``64x64_32x6`` keeps its parts.
_TILE = re.compile(r"\d+(?:x\d+)+")


@functools.cache
def _demangler() -> Callable[[str], str] | None:
    """``cxxfilt.demangle``; ``None`` (names stay mangled, said once) where the C++ runtime it
    binds (libstdc++ or libc++) cannot be found. Imported on first use: finding the runtime
    asks ``ldconfig``."""
    import cxxfilt

    try:
        cxxfilt.demangle("_Z1fv")
    except cxxfilt.LibraryNotFound as exc:
        warnings.warn(f"kernel names stay mangled: {exc} (install libstdc++, e.g. "
                      "apt-get install libstdc++6)", stacklevel=3)
        return None
    return cxxfilt.demangle


def demangle(name: str) -> str:
    """The demangled name of an Itanium-mangled ``name`` (``_Z...``); any other name, or one the
    demangler refuses, as is."""
    if not name.startswith("_Z") or len(name) > _MAX_MANGLED:
        return name
    demangler = _demangler()
    if demangler is None:
        return name
    import cxxfilt

    try:
        return demangler(name)
    except (cxxfilt.Error, UnicodeDecodeError):
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
    """The kernel's qualified name with template arguments, no return type, no arguments.

    Only a C++ signature loses its parts: an argument list right after the name
    (``void f<int>(int, float*)``), then the return type before it. A name with a space before
    its parenthesis or none at all is kept whole: ``Memcpy HtoD (Device -> Pinned)``,
    ``autograd::engine::evaluate_function: MmBackward0`` (an op around ``MmBackward0``, not
    it), a Python profiler's ``f (work.py:12)``."""
    text = name.strip()
    for suffix in _SUFFIXES:
        text = text.removesuffix(suffix)
    text = demangle(text).replace(_ANONYMOUS, "")
    if not text.endswith(")"):
        return text
    depths = _depths(text)
    opening = max((i for i, c in enumerate(text) if c == "(" and depths[i] == depths[-1]),
                  default=0)
    if opening == 0 or text[opening - 1].isspace():
        return text
    text, depths = text[:opening].rstrip(), depths[:opening]
    spaces = [i for i, c in enumerate(text) if c == " " and depths[i] == 0]
    return text[spaces[-1] + 1:] if spaces else text


def _without_templates(text: str) -> str:
    """``text`` with what its outermost ``<...>`` hold dropped (``f<a<b>, 2>`` -> ``f<>``)."""
    depth, out = 0, []
    for char in text:
        if char == ">" and depth:
            depth -= 1
        if depth == 0:
            out.append(char)
        if char == "<":
            depth += 1
    return "".join(out)


def kernel_key(name: str, templates: bool = True, tiles: bool = True) -> str:
    """What two names must share to be the same kernel. ``templates=False`` collapses template
    arguments (``f<4, Functor<float>>`` -> ``f<>``), ``tiles=False`` tile shapes
    (``..._128x128x64_...`` -> ``..._*_...``)."""
    key = re.sub(r"\s+", "", signature(name)).lower()
    if not templates:
        key = _without_templates(key)
    return key if tiles else _TILE.sub("*", key)
