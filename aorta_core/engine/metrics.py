"""Metrics into the record: each collector's ``parse_metrics`` and the workload's own metrics file,
cleaned to what the contract allows and JSON carries exactly.

Kept: bools, integers within 64 bits, finite floats, text, lists of text. An integer beyond 64
bits becomes a float when it is finite; text that UTF-8 cannot carry (lone surrogates) is
escaped. Anything else is dropped with a note naming the metric: never an invented number.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.contracts import SetupError
from aorta_core.api.files import FileRefused, read_regular
from aorta_core.api.oneline import exception_line
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S, call_hook
from aorta_core.engine.kernel_tables import KernelTables

_INT64 = (-(1 << 63), (1 << 63) - 1)


def safe_text(text: str) -> str:
    """``text`` as UTF-8 can carry it: undecodable bytes (``\\udcff``) as ``\\xff``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def clean_value(value: Any) -> Any:
    """The value as the contract allows it, or ``None`` to drop the metric. A plugin's subclass
    of a number, text or list is read by the base type's own methods (its own may raise or lie)
    and comes back as the plain type."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        value = int.__int__(value)
        if _INT64[0] <= value <= _INT64[1]:
            return value
        try:
            value = float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        value = float.__float__(value)
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return safe_text(str.__str__(value))
    if isinstance(value, list | tuple):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return [safe_text(str.__str__(v)) for v in items]
    return None


class Notes:
    """Per-collector warnings and hook failures, for the record."""

    def __init__(self, hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S) -> None:
        self.by_collector: dict[str, list[str]] = {}
        self.hook_timeout_s = hook_timeout_s
        #: Collector -> the reason it measured nothing, from a hook that may say so
        #: (``collect_artifacts`` raising ``SetupError``): the trial's error.
        self.unmeasured: dict[str, str] = {}

    def add(self, name: str, message: str) -> None:
        self.by_collector.setdefault(name, []).append(safe_text(message))

    def call(self, name: str, what: str, fn, default, may_refuse: bool = False):
        """``fn()`` isolated (:func:`~aorta_core.engine.isolation.call_hook`); ``default`` on
        failure. ``may_refuse``: a ``SetupError`` it raises is the collector's reason in
        :attr:`unmeasured`, not a note."""
        outcome = call_hook(fn, self.hook_timeout_s)
        for message in outcome.warnings:
            self.add(name, message)
        if may_refuse and isinstance(outcome.error, SetupError):
            self.unmeasured[name] = exception_line(outcome.error).removeprefix("SetupError: ")
            return default
        if outcome.failure is not None:
            self.add(name, f"{what} failed: {outcome.failure}")
            return default
        return outcome.value


def clean_metrics(prefix: str, raw: Any, notes: Notes, source: str) -> dict[str, Any]:
    """The metrics of ``raw`` whose keys start with ``prefix``, cleaned; the rest noted. A
    mapping, key or value that raises when read costs that metric (or all, for the mapping)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        notes.add(source, f"{source} metrics are a {type(raw).__name__}, not a dict; ignored")
        return {}
    try:
        items = list(raw.items())
    except Exception as exc:
        notes.add(source, f"{source} metrics cannot be read ({type(exc).__name__} raised while "
                          "reading them); ignored")
        return {}
    out = {}
    for key, value in items:
        try:
            problem, clean = _metric(prefix, key, value)
        except Exception as exc:
            problem = f"a metric cannot be read ({type(exc).__name__} raised while reading it)"
        if problem is None:
            out[str.__str__(key)] = clean
        else:
            notes.add(source, f"{problem}; dropped")
    return out


def _metric(prefix: str, key: Any, value: Any) -> tuple[str | None, Any]:
    """What is wrong with one metric (``None``: nothing), and its clean value."""
    if not isinstance(key, str) or not str.startswith(key, prefix):
        return f"metric {_shown(key, str)} lacks the {prefix} prefix", None
    key = str.__str__(key)
    if safe_text(key) != key:
        return f"metric {safe_text(key)!r} is not valid text", None
    clean = clean_value(value)
    if clean is None:
        return f"metric {key!r} has an unusable value {_shown(value, repr)}", None
    return None, clean


def _shown(value: Any, how: Any) -> str:
    """``how(value)`` (``str`` or ``repr``) as it can be shown, at most 80 characters."""
    try:
        text = safe_text(str.__str__(how(value)))[:80]
    except Exception as exc:
        return f"of type {type(value).__name__} ({type(exc).__name__} raised showing it)"
    return repr(text) if how is str else text


def collector_metrics(registry, name: str, folder: Path, options: Any, notes: Notes,
                      tables: KernelTables | None = None) -> dict[str, Any]:
    """``parse_metrics`` of one collector, isolated and cleaned as the contract says (in the
    hook's process: what the plugin returned runs code when read); with ``tables``, its
    ``kernel_table`` too, in the same process (:mod:`aorta_core.engine.kernel_tables`).

    Shared by every trial and by ``aorta parse``, so both show the same metrics.
    """
    def parse() -> tuple[dict[str, Any], list[tuple] | None]:
        metrics = _cleaned(name, registry.call(name, "parse_metrics", artifact_dir=folder,
                                               options=options))
        return metrics, tables and tables.add(registry, name, folder, options)

    metrics, rows = notes.call(name, "parse_metrics", parse, ({}, None))
    if tables is not None:
        tables.took(rows)
    return metrics


def _cleaned(name: str, raw: Any) -> dict[str, Any]:
    """In the hook's process: :func:`clean_metrics`, whose notes become warnings of the call."""
    notes = Notes()
    metrics = clean_metrics(f"{name}_", raw, notes, name)
    for message in notes.by_collector.get(name, []):
        warnings.warn(message, stacklevel=1)
    return metrics


def _decode_lenient(data: bytes) -> Any:
    """Strict JSON, else what Python's ``json.dump`` writes by default (``NaN``, ``\udcff``)."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        import json  # only for what msgspec refuses: most commands never get here

        return json.loads(data)


def workload_metrics(path: Path, notes: Notes) -> dict[str, Any]:
    """The workload's own metrics file (``$AORTA_METRICS_PATH``): a JSON object of numbers."""
    try:
        data = _decode_lenient(read_regular(path, 16 << 20))
    except FileNotFoundError:
        return {}
    except (FileRefused, ValueError, RecursionError) as exc:
        notes.add("workload", f"{path.name} is unusable ({safe_text(str(exc))}); metrics omitted")
        return {}
    if not isinstance(data, dict):
        notes.add("workload", f"{path.name} must hold a JSON object; metrics omitted")
        return {}
    return clean_metrics("workload_", {f"workload_{k}": v for k, v in data.items()}, notes,
                         "workload")
