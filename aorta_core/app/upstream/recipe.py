"""Read an upstream ROCm/aorta probe recipe with upstream's strict schema.

Upstream rejects an unknown key at every level, a value of the wrong type (no coercion: ``"2"``
is not ``2``, ``true`` is not ``1``), a ``schema_version`` other than the integer 1 and a
``mode`` other than ``triage``/``probe``. aorta keeps that contract (msgspec structs with
``forbid_unknown_fields``), so a recipe upstream refuses is refused here too, and every error
is one line that names the key and what to write instead.

What the schema accepts but aorta cannot honour (upstream's hang and pattern detectors, the
speed-confound check, early stopping, ``aorta bundle`` redaction, ...) is refused by
:func:`refusals` with the key and the reason, never silently dropped.
"""

from __future__ import annotations

import difflib
import json
import re
import reprlib
import typing
import warnings
import zlib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from aorta_core.api.files import FileRefused, check_regular, read_limited
from aorta_core.api.oneline import exception_line
from aorta_core.app.upstream.bounded_yaml import BoundedLoader, TooCostly
from aorta_core.app.upstream.mitigations import BUILTIN

SCHEMA_VERSION = 1
_DOCS = "docs/profiling.md section 0 lists every key"
_LEVEL = Literal["full", "summary", "log", "none"]
_POSITIVE = msgspec.Meta(gt=0)
_AXIS = Annotated[list[str], msgspec.Meta(min_length=1)]
#: Upstream's cell-name and path-segment shape (its ``_validate_cell_name``); a ticket too.
SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
#: Triage-mode keys: upstream refuses them in a probe recipe, which synthesises its own cells.
_TRIAGE_ONLY = ("workload", "steps", "cells", "workload_config", "save_logs", "extra_env",
                "trial_isolation")


class RecipeError(ValueError):
    """The recipe cannot run; the message is the one line to show (exit status 2)."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


class Confound(_Strict):
    threshold: Annotated[float, _POSITIVE] = 1.15
    baseline_cell: str | None = None


class StopAfter(_Strict):
    events: Annotated[int, msgspec.Meta(ge=1)]
    max_trials: Annotated[int, msgspec.Meta(ge=1)]
    event_verdict: Literal["fail", "pass", "error"] = "fail"


class Retain(_Strict):
    on_fail: _LEVEL = "full"
    on_pass: _LEVEL = "full"
    on_error: _LEVEL = "full"


class Redaction(_Strict):
    scrub_env_keys: list[str] = []
    scrub_paths: bool = False
    scrub_ip_addresses: bool = False


class ProbeRecipe(_Strict):
    """Upstream's ``mode: probe`` recipe (schema version 1), key for key."""

    schema_version: int
    mode: Literal["probe"]
    trials: Annotated[int, msgspec.Meta(ge=1)]
    mitigation_axis: _AXIS
    diagnostic_axis: _AXIS
    ticket: str | None = None
    step_time_regex: str | None = None
    collect_paths: list[str] | None = None
    timeout_per_trial: Annotated[float, _POSITIVE] | None = None
    env_passthrough_mode: Literal["inherit", "file"] = "inherit"
    confound: Confound | None = None
    custom_patterns: list[dict[str, Any]] | None = None
    hang_window_sec: Annotated[float, _POSITIVE] | None = None
    hang_grace_period_at_start: Annotated[float, msgspec.Meta(ge=0)] | None = None
    tier3_vram_growth: bool | None = None
    stop_after: StopAfter | None = None
    #: ``[rocprof]`` (names) or ``{rocprof: {trace: "kernel,hip"}, proton: null}`` (options).
    collect: list[str] | dict[str, Any] | None = None
    disable_detectors: list[str] | None = None
    disable_detector_tiers: list[str] | None = None
    retain: Retain | None = None
    redaction: Redaction | None = None


#: The recipe's blocks by key path, for "did you mean" on an unknown key inside one.
_BLOCKS = {"": ProbeRecipe, "confound": Confound, "stop_after": StopAfter, "retain": Retain,
           "redaction": Redaction}
#: The allowed values of each enumerated key, for the error that names a wrong one.
_CHOICES = {**dict.fromkeys(Retain.__struct_fields__, typing.get_args(_LEVEL)),
            "env_passthrough_mode": ("inherit", "file"),
            "event_verdict": ("fail", "pass", "error")}


#: A recipe is a few lines; a file above this is none (and pure-Python YAML reads ~100 KB/s).
RECIPE_LIMIT = 64 << 10


def _bytes(path: Path) -> bytes:
    """The recipe file's bytes: a regular file (a FIFO, ``/dev/zero`` or a folder is refused
    unopened) of at most :data:`RECIPE_LIMIT` bytes."""
    where = f"--recipe {path}"
    try:
        if path.is_dir():
            raise RecipeError(f"{where} is a folder; give the path of a recipe .yaml")
        size = check_regular(path)
        if size > RECIPE_LIMIT:
            raise RecipeError(f"{where} is {size:,} bytes, not a recipe (a few lines of YAML; "
                              f"aorta reads up to {RECIPE_LIMIT >> 10} KiB); give the path of "
                              "a recipe .yaml")
        return read_limited(path, limit=RECIPE_LIMIT)
    except FileNotFoundError:
        raise RecipeError(f"{where}: no such file; give the path of a recipe .yaml") from None
    except FileRefused as exc:
        raise RecipeError(f"--recipe {exc}; give the path of a recipe .yaml") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise RecipeError(f"{where}: cannot read it ({exception_line(exc)})") from None


def _read(path: Path) -> Any:
    data = _bytes(path)
    try:
        text = data.decode("utf-8-sig")  # an editor's BOM is no part of the recipe
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); save it as UTF-8") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecipeError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                              f"{exc.msg}); fix the syntax") from None
        except (RecursionError, ValueError) as exc:  # 1000s deep; an int of 4,300+ digits
            why = "nested too deeply" if isinstance(exc, RecursionError) else \
                str(exc).partition(";")[0]
            raise RecipeError(f"{path}: not a recipe aorta reads ({why}); {_DOCS}") from None
    try:
        return yaml.load(text, BoundedLoader)  # a SafeLoader: no Python tags
    except TooCostly as exc:
        raise RecipeError(f"{path}: not a recipe aorta reads (line {exc.problem_mark.line + 1}: "
                          f"{exc.problem}); {_DOCS}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RecipeError(f"{path}: not valid YAML ({at}{problem}); fix the syntax") from None


def _header(path: Path, data: Any) -> None:
    """``schema_version`` and ``mode`` first: they decide which schema applies."""
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of keys (schema_version: 1, "
                          f"mode: probe, ...), got {type(data).__name__}; {_DOCS}")
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise RecipeError(f"{path}: schema_version is missing; add schema_version: 1")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise RecipeError(f"{path}: schema_version: {reprlib.repr(version)} is not supported; "
                          f"this aorta reads schema_version: {SCHEMA_VERSION} (an integer)")
    if "mode" not in data:
        raise RecipeError(f"{path}: mode is missing (upstream's default, triage, has no "
                          "counterpart in aorta); add mode: probe")
    mode = data["mode"]
    if mode == "triage":
        raise RecipeError(
            f"{path}: mode: triage (upstream's registered workloads x environments) has no "
            "counterpart in aorta; write a probe recipe (mode: probe) and give your command "
            "after --")
    if mode != "probe":
        raise RecipeError(f"{path}: mode: {reprlib.repr(mode)} is not a recipe mode; aorta runs "
                          "mode: probe recipes")
    triage = [k for k in _TRIAGE_ONLY if k in data]
    if triage:
        raise RecipeError(f"{path}: {', '.join(triage)}: triage-mode keys; a probe recipe makes "
                          "its cells from mitigation_axis x diagnostic_axis and runs the command "
                          "after --: remove them")


def _schema_line(path: Path, exc: msgspec.ValidationError) -> str:
    text = str(exc)
    message, _, where = text.partition(" - at `$")
    key = where.rstrip("`").lstrip(".")
    unknown = re.fullmatch(r"Object contains unknown field `(.+)`", message)
    if unknown:
        name = unknown.group(1)
        full = f"{key}.{name}" if key else name
        struct = _BLOCKS.get(key)
        known = struct.__struct_fields__ if struct else ()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}?" if close else _DOCS
        return f"{path}: {full} is not a key of an upstream probe recipe; {hint}"
    missing = re.fullmatch(r"Object missing required field `(.+)`", message)
    if missing:
        full = f"{key}.{missing.group(1)}" if key else missing.group(1)
        return f"{path}: {full} is required; {_DOCS}"
    if message.startswith("Invalid enum value"):
        choices = _CHOICES.get(key.rsplit(".", 1)[-1])
        return (f"{path}: {key}: {message.split(' ', 3)[-1]} is not allowed; use one of "
                f"{', '.join(choices)}" if choices else f"{path}: {key}: {message}")
    message = message.replace("`", "").replace("array", "list").replace("object", "mapping")
    return f"{path}: {key or 'recipe'}: {message[0].lower()}{message[1:]}; {_DOCS}"


def _axis(path: Path, key: str, names: list[str]) -> None:
    for i, name in enumerate(names):
        if name not in BUILTIN:
            close = difflib.get_close_matches(name, list(BUILTIN), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise RecipeError(
                f"{path}: {key}[{i}]: {reprlib.repr(name)} is not one of upstream's built-in "
                f"mitigations ({hint}aorta sweep list-mitigations shows them; plugin and "
                "--mitigations-file names are not supported)")
        if name in names[:i]:
            raise RecipeError(f"{path}: {key}: {reprlib.repr(name)} is listed twice; list each "
                              "name once")


def _cell_envs(path: Path, recipe: ProbeRecipe) -> None:
    """Upstream refuses a cell whose two names set one variable to different values."""
    for m in recipe.mitigation_axis:
        for d in recipe.diagnostic_axis:
            for key, value in BUILTIN[d].items():
                other = BUILTIN[m].get(key)
                if other is not None and other != value:
                    raise RecipeError(
                        f"{path}: cell {m}-{d}: mitigation {m} sets {key}={other} and "
                        f"diagnostic {d} sets {key}={value}; drop one of them from its axis")


def load(path: Path) -> ProbeRecipe:
    """The validated recipe at ``path``; :class:`RecipeError` with one line otherwise."""
    data = _read(path)
    _header(path, data)
    try:
        recipe = msgspec.convert(data, ProbeRecipe, strict=True)
    except msgspec.ValidationError as exc:
        raise RecipeError(_schema_line(path, exc)) from None
    if recipe.ticket is not None and not SEGMENT.fullmatch(recipe.ticket):
        raise RecipeError(f"{path}: ticket: {reprlib.repr(recipe.ticket)} names the output "
                          "subfolder; use letters, digits, '_', '.' and '-' (e.g. PERF-123)")
    if recipe.step_time_regex is not None:
        try:
            with warnings.catch_warnings():  # a FutureWarning (a nested set) is no line of ours
                warnings.simplefilter("ignore")
                re.compile(recipe.step_time_regex)
        except (re.error, RecursionError, OverflowError) as exc:  # 1000s of groups; a{2**32}
            raise RecipeError(f"{path}: step_time_regex: not a regular expression aorta can "
                              f"compile ({exc})") from None
    _axis(path, "mitigation_axis", recipe.mitigation_axis)
    _axis(path, "diagnostic_axis", recipe.diagnostic_axis)
    _cell_envs(path, recipe)
    return recipe


def refusals(recipe: ProbeRecipe) -> list[str]:
    """``key: reason`` for each setting of the recipe that aorta cannot honour.

    A key left at upstream's default (null, an empty list) asks for nothing and passes; so do
    ``disable_detectors`` / ``disable_detector_tiers``: aorta runs none of upstream's detectors
    (a trial's verdict is its exit status and timeout), so every detector is already off.
    """
    verdict = "aorta's verdict is the exit status and the timeout"
    checks = {
        "step_time_regex": (recipe.step_time_regex is not None,
                            "aorta does not read step times from logs; write them as JSON to "
                            "$AORTA_METRICS_PATH (workload_* metrics)"),
        "collect_paths": (bool(recipe.collect_paths),
                          "aorta keeps each trial's own folder ($AORTA_TRIAL_DIR); write the "
                          "files there"),
        "env_passthrough_mode": (recipe.env_passthrough_mode == "file",
                                 "file (probe.env + AORTA_ENV_FILE) has no counterpart; aorta "
                                 "passes the cell's variables in the environment; write "
                                 "inherit"),
        "confound": (recipe.confound is not None,
                     "the speed-confound check has no counterpart; compare cells with "
                     "aorta compare or perf.md"),
        "custom_patterns": (bool(recipe.custom_patterns), f"log patterns are not matched; "
                                                          f"{verdict}"),
        "hang_window_sec": (recipe.hang_window_sec is not None,
                            f"there is no hang detector; {verdict} (timeout_per_trial)"),
        "hang_grace_period_at_start": (recipe.hang_grace_period_at_start is not None,
                                       f"there is no hang detector; {verdict}"),
        "tier3_vram_growth": (bool(recipe.tier3_vram_growth),
                              f"there is no VRAM-growth detector; {verdict}"),
        "stop_after": (recipe.stop_after is not None,
                       "a sweep does not stop early; every cell runs its trials"),
        "redaction": (recipe.redaction is not None,
                      "it configures upstream's aorta bundle, which has no counterpart"),
    }
    return [f"{key}: {reason}" + ("" if reason.endswith("inherit") else "; remove it")
            for key, (refused, reason) in checks.items() if refused]
