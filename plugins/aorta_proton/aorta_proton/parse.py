"""Turn Proton's artifacts into ``proton_*`` metrics.

``.hatchet`` trees (``data: tree``): a JSON array whose first element is the ROOT frame. Stored
metrics are exclusive, so every frame below ROOT that carries ``time (<unit>)`` is one kernel's
total, ``cycles`` one intra-kernel scope's, ``num_samples`` PC samples. ROOT holds placeholders
and ``__proton_launch_metadata`` subtrees are launch-hook bookkeeping; both are skipped (as
``proton-viewer`` does). ``.chrome_trace`` files (``data: trace``) give kernel events
(``cat: "kernel"``, ``dur`` in µs; aorta's clock marks left out), every GPU stream's document
of a file. Several files are summed. Nothing here raises: a bad file costs its metrics and a
warning. Files are read through the core's bounded reader (regular
files inside the folder, within the read limit); counts are published JSON-safe.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api import (
    FileRefused,
    KernelRow,
    decode_documents,
    files_under,
    json_number,
    read_limited,
    without_bom,
)
from aorta_proton.clock_marks import MARK_KERNEL
from aorta_proton.session import METADATA_FRAME

_DECODER = msgspec.json.Decoder()
_TIME = re.compile(r"time \((ns|us|ms|s)\)$", re.IGNORECASE)
_NS_PER = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
TOP_N = 5
#: Per-scope share metrics published for at most this many of the hottest scopes.
SCOPE_KEYS = 10


def _number(value: Any) -> float | None:
    """A finite, non-negative JSON number, else ``None`` (bools are not numbers here; an int
    beyond a float's range is not one either)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


@dataclass
class Totals:
    """Sums over every profile file of one artifact folder."""

    kernel_ns: dict[str, float] = field(default_factory=dict)
    kernel_calls: int = 0
    calls_known: bool = True
    #: Calls per kernel name; a name whose count is unreadable is left out.
    calls_by_name: dict[str, int] = field(default_factory=dict)
    uncounted: set[str] = field(default_factory=set)
    scope_cycles: dict[str, float] = field(default_factory=dict)
    scope_normalized: dict[str, float] = field(default_factory=dict)
    samples: float = 0.0
    stalled: float = 0.0
    sampled: bool = False
    #: Files that were well-formed profiles (a ROOT-only one counts: it says "no GPU work").
    readable: int = 0

    def add_kernel(self, name: str, ns: float, calls: Any) -> None:
        self.kernel_ns[name] = self.kernel_ns.get(name, 0.0) + ns
        count = _number(calls)
        if count is None or count != int(count):
            self.calls_known = False
            self.uncounted.add(name)
        else:
            self.kernel_calls += int(count)
            self.calls_by_name[name] = self.calls_by_name.get(name, 0) + int(count)

    def add_frame(self, name: str, metrics: dict[str, Any]) -> None:
        ns = next(
            (
                _number(value) * _NS_PER[match[1].lower()]
                for key, value in metrics.items()
                if isinstance(key, str)
                and (match := _TIME.match(key))
                and _number(value) is not None
            ),
            None,
        )
        if ns is not None:
            self.add_kernel(name, ns, metrics.get("count"))
        cycles = _number(metrics.get("cycles"))
        if cycles is not None:
            self.scope_cycles[name] = self.scope_cycles.get(name, 0.0) + cycles
            normalized = _number(metrics.get("normalized_cycles"))
            if normalized is not None:
                self.scope_normalized[name] = self.scope_normalized.get(name, 0.0) + normalized
        samples = _number(metrics.get("num_samples"))
        if samples is not None:
            self.sampled = True
            self.samples += samples
            self.stalled += _number(metrics.get("num_stalled_samples")) or 0.0


def _frames(tree: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, metrics) of every frame below each ROOT, skipping launch-metadata subtrees."""
    stack = [
        child
        for root in tree
        if isinstance(root, dict) and isinstance(root.get("children"), list)
        for child in root["children"]
    ]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        frame = node.get("frame")
        name = frame.get("name") if isinstance(frame, dict) else None
        if not isinstance(name, str) or name.startswith(METADATA_FRAME):
            continue
        metrics = node.get("metrics")
        if isinstance(metrics, dict):
            yield name, metrics
        children = node.get("children")
        if isinstance(children, list):
            stack.extend(children)


def _load(path: Path, root: Path) -> list[Any] | None:
    """The file's JSON documents (a chrome trace holds one per GPU stream, one per line)."""
    try:
        with without_bom(read_limited(path, root)) as text:
            return decode_documents(text, _DECODER)
    except FileRefused as exc:  # a FIFO, a device, a link out of the folder, too large
        warnings.warn(f"{exc}; its metrics are omitted", stacklevel=3)
    except (OSError, msgspec.DecodeError) as exc:
        warnings.warn(f"cannot read {path.name}: {exc}", stacklevel=3)
    except RecursionError:  # msgspec's limit on nesting: a tree no profiler writes
        warnings.warn(f"cannot read {path.name}: JSON nested too deeply", stacklevel=3)
    return None


def _add_hatchet(path: Path, root: Path, totals: Totals) -> None:
    documents = _load(path, root)
    if documents is None:
        return
    tree = documents[0] if len(documents) == 1 else None
    if not (isinstance(tree, list) and tree and isinstance(tree[0], dict) and "frame" in tree[0]):
        warnings.warn(f"{path.name} is not a Proton tree (no ROOT frame)", stacklevel=2)
        return
    totals.readable += 1
    for name, metrics in _frames(tree):
        totals.add_frame(name, metrics)


def _add_trace(path: Path, root: Path, totals: Totals) -> None:
    documents = _load(path, root)
    if documents is None:
        return
    streams = [doc.get("traceEvents") if isinstance(doc, dict) else None for doc in documents]
    if not all(isinstance(events, list) for events in streams):
        warnings.warn(f"{path.name} has no traceEvents list", stacklevel=2)
        return
    totals.readable += 1
    for event in (event for events in streams for event in events):
        if not (isinstance(event, dict) and event.get("ph") == "X"):
            continue
        if event.get("cat") != "kernel" or not isinstance(event.get("name"), str) \
                or event["name"] == MARK_KERNEL:  # aorta's clock marks, not the workload's
            continue
        dur = _number(event.get("dur"))
        if dur is not None:
            totals.add_kernel(event["name"], dur * 1e3, 1)


def _count(value: float) -> int | float:
    """Cycles and samples are counts: ints when whole, floats beyond 64 bits (``value`` is
    finite, so never ``None``)."""
    return json_number(int(value) if value.is_integer() else value)


def _ranked(values: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(values.items(), key=lambda item: (-item[1], item[0]))


def _scope_key(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_") or "unnamed"


def _kernel_metrics(totals: Totals) -> dict[str, Any]:
    ranked = _ranked(totals.kernel_ns)
    total_ns = sum(totals.kernel_ns.values())
    if not math.isfinite(total_ns):
        warnings.warn("kernel times overflow; kernel metrics omitted", stacklevel=3)
        return {}
    out: dict[str, Any] = {}
    calls = json_number(totals.kernel_calls) if totals.calls_known else None
    if calls is None:
        warnings.warn(
            "some kernel counts are unreadable or beyond float range; kernel_count omitted",
            stacklevel=3,
        )
    else:
        out["proton_kernel_count"] = calls
    out["proton_gpu_time_ms"] = total_ns / 1e6
    out["proton_top_kernel_ms"] = ranked[0][1] / 1e6
    out["proton_top_kernels"] = [name for name, _ in ranked[:TOP_N]]
    return out


def _scope_metrics(totals: Totals) -> dict[str, Any]:
    ranked = _ranked(totals.scope_cycles)
    total = sum(totals.scope_cycles.values())
    if not math.isfinite(total):
        warnings.warn("scope cycles overflow; scope metrics omitted", stacklevel=3)
        return {}
    top, top_cycles = ranked[0]
    out: dict[str, Any] = {
        "proton_scope_cycles": _count(total),
        "proton_top_scope": top,
        "proton_top_scope_cycles": _count(top_cycles),
        "proton_top_scopes": [name for name, _ in ranked[:TOP_N]],
    }
    normalized = json_number(totals.scope_normalized.get(top))  # None: absent or overflowed
    if normalized is not None:
        out["proton_top_scope_normalized_cycles"] = normalized
    if total > 0:
        for name, cycles in ranked[:SCOPE_KEYS]:
            out.setdefault(f"proton_scope_{_scope_key(name)}_share", cycles / total)
    return out


#: The totals of the folder parsed last in this process, for ``kernel_table`` (called right
#: after ``parse_metrics`` in the same process): the profiles are not read twice.
_last: dict[Path, Totals] = {}


def _totals(artifact_dir: Path) -> Totals:
    totals = Totals()
    files = files_under(artifact_dir, "*.hatchet") + files_under(artifact_dir, "*.chrome_trace")
    for path in files:
        (_add_hatchet if path.suffix == ".hatchet" else _add_trace)(path, artifact_dir, totals)
    _last.clear()
    _last[artifact_dir.resolve()] = totals
    return totals


def kernel_rows(artifact_dir: Path) -> list[KernelRow]:
    """One row per kernel (no steps: a Proton profile sums the whole session), from the
    profiles ``parse`` read; kernels whose call count is unreadable are left out."""
    artifact_dir = Path(artifact_dir)
    if not artifact_dir.is_dir():
        return []
    totals = _last.get(artifact_dir.resolve()) or _totals(artifact_dir)
    return [KernelRow(name, totals.calls_by_name.get(name, 0), ns / 1e6, "gpu_kernel")
            for name, ns in totals.kernel_ns.items()
            if name not in totals.uncounted and math.isfinite(ns)]


def parse(artifact_dir: Path) -> dict[str, Any]:
    """Metrics of every Proton profile under ``artifact_dir`` (``{}`` when there is none)."""
    if not artifact_dir.is_dir():
        return {}
    totals = _totals(artifact_dir)
    for path in files_under(artifact_dir, "*.hatchet_msgpack"):
        warnings.warn(
            f"{path.name} is msgpack, which aorta does not read; "
            "use backend_mode periodic_flushing:format=hatchet",
            stacklevel=2,
        )
    out: dict[str, Any] = {}
    if totals.kernel_ns:
        out.update(_kernel_metrics(totals))
    if totals.scope_cycles:
        out.update(_scope_metrics(totals))
    if totals.sampled and math.isfinite(totals.samples + totals.stalled):
        out["proton_pc_samples"] = _count(totals.samples)
        out["proton_pc_stalled_samples"] = _count(totals.stalled)
    if totals.readable and not (totals.kernel_ns or totals.scope_cycles or totals.sampled):
        warnings.warn(
            "no GPU work seen: the profile holds no kernel, scope or sample "
            "(the run launched no kernel Proton could see)",
            stacklevel=2,
        )
    return out
