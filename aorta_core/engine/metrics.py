"""Metrics into the record: each collector's ``parse_metrics`` and the workload's own metrics file,
cleaned to what the contract allows and JSON carries exactly.

Kept: bools, integers within 64 bits, finite floats, text, lists of text. An integer beyond 64
bits becomes a float when it is finite; text that UTF-8 cannot carry (lone surrogates) is
escaped. Anything else is dropped with a note naming the metric: never an invented number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from aorta_core.api.contracts import SetupError
from aorta_core.api.files import FileRefused, read_regular
from aorta_core.api.oneline import exception_line
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S, call_hook

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
    """The value as the contract allows it, or ``None`` to drop the metric."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if _INT64[0] <= value <= _INT64[1]:
            return value
        try:
            value = float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [safe_text(v) for v in value]
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
    """The metrics of ``raw`` whose keys start with ``prefix``, cleaned; the rest noted."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        notes.add(source, f"{source} metrics are a {type(raw).__name__}, not a dict; ignored")
        return {}
    out = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.startswith(prefix):
            notes.add(source, f"metric {safe_text(str(key))!r} lacks the {prefix} prefix; dropped")
            continue
        if safe_text(key) != key:
            notes.add(source, f"metric {safe_text(key)!r} is not valid text; dropped")
            continue
        clean = clean_value(value)
        if clean is None:
            shown = safe_text(repr(value))[:80]
            notes.add(source, f"metric {key!r} has an unusable value {shown}; dropped")
            continue
        out[key] = clean
    return out


def collector_metrics(registry, name: str, folder: Path, options: Any, notes: Notes
                      ) -> dict[str, Any]:
    """``parse_metrics`` of one collector, isolated and cleaned as the contract says.

    Shared by every trial and by ``aorta parse``, so both show the same metrics.
    """
    raw = notes.call(
        name, "parse_metrics",
        lambda: registry.call(name, "parse_metrics", artifact_dir=folder, options=options),
        None,
    )
    return clean_metrics(f"{name}_", raw, notes, name)


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
