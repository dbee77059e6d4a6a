"""The core's own config keys, typed by one structured schema (:class:`CoreSettings`).

The pre-check validates them when the command line is composed (a mistake is exit status 2
before anything runs); each Hydra job validates them again for values a sweep varies
(``trials=1,abc``), refusing only that cell. Recipes may add keys of their own (``size: 1024``):
only the core's keys are typed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, fields
from enum import StrEnum

from omegaconf import Container, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aorta_core.api.files import DEFAULT_READ_LIMIT_MB
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S
from aorta_core.engine.logs import DEFAULT_LOG_LIMIT_MB


class RetainLevel(StrEnum):
    """What to keep of a trial's files once its metrics are parsed (docs/sweeps.md)."""

    full = "full"
    summary = "summary"
    log = "log"
    none = "none"


class RetryPolicy(StrEnum):
    """Which recorded trials the same command runs again (docs/sweeps.md, "Retry")."""

    none = "none"
    #: Trials that measured nothing (a collector could not attach, the command could not start).
    errored = "errored"
    #: Those, and trials whose payload failed or timed out.
    failed = "failed"

    @property
    def verdicts(self) -> tuple[str, ...]:
        """The verdicts of recorded trials that this policy runs again."""
        return {"none": (), "errored": ("error",), "failed": ("error", "fail")}[self.value]


class TrialOrder(StrEnum):
    """In which order a sweep runs its trials (docs/sweeps.md, "Trial order")."""

    #: Every trial of a cell, then the next cell.
    cells = "cells"
    #: Trial 0 of every cell, then trial 1 of every cell, ...: drift hits every cell alike.
    rounds = "rounds"


@dataclass
class Retain:
    on_pass: RetainLevel = RetainLevel.full
    on_fail: RetainLevel = RetainLevel.full
    on_error: RetainLevel = RetainLevel.full


@dataclass
class CoreSettings:
    """Top-level keys every recipe understands; see conf/config.yaml, docs/sweeps.md."""

    trials: int = 3
    timeout: float | None = 600
    hook_timeout: float | None = DEFAULT_HOOK_TIMEOUT_S
    read_limit_mb: float = DEFAULT_READ_LIMIT_MB
    log_limit_mb: float | None = DEFAULT_LOG_LIMIT_MB
    allow_failures: bool = False
    requires_command: bool = False
    timeline: bool = False
    diagnose: bool = False
    env: dict[str, str] = field(default_factory=dict)
    devices: list[str] | None = None
    devices_per_cell: int = 1
    device_env: list[str] = field(default_factory=lambda: ["CUDA_VISIBLE_DEVICES"])
    retain: Retain = field(default_factory=Retain)
    retry: RetryPolicy = RetryPolicy.errored
    order: TrialOrder = TrialOrder.cells

    def retain_levels(self) -> dict[str, str]:
        return {k: getattr(self.retain, k).value for k in ("on_pass", "on_fail", "on_error")}


class SettingsError(ValueError):
    """A core key with a wrong type or value; the message names the key and what is allowed."""


_SCHEMA = OmegaConf.structured(CoreSettings)


#: What a key holds, added where OmegaConf's own words do not say it.
_HINTS = {"devices": "a list of device ids, e.g. devices=[0,1,2,3]",
          "device_env": "a list of variable names, e.g. device_env=[HIP_VISIBLE_DEVICES]"}


def _one_line(exc: OmegaConfBaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    key = getattr(exc, "full_key", None)
    hint = f" ({key} is {_HINTS[key]})" if key in _HINTS else ""
    return f"{key}: {text}{hint}" if key else text


#: The longest ``hook_timeout`` a thread can be waited for (``threading.TIMEOUT_MAX``, ~292 years).
MAX_HOOK_TIMEOUT_S = threading.TIMEOUT_MAX


def _positive(s: CoreSettings) -> None:
    """Finite positive seconds and MiB: ``inf`` or ``nan`` would pass ``> 0`` and then crash a
    started trial's timer or the read budget (``null`` is how a timeout says "no limit")."""
    for key, unit, top in (("timeout", "seconds", math.inf),
                           ("hook_timeout", "seconds", MAX_HOOK_TIMEOUT_S),
                           ("read_limit_mb", "MiB", math.inf),
                           ("log_limit_mb", "MiB", math.inf)):
        value = getattr(s, key)
        if value is None or (0 < value <= top and math.isfinite(value)):
            continue
        most = f" up to {top:.0f}" if math.isfinite(top) else ""
        none = "; null for no limit" if key != "read_limit_mb" else ""
        raise SettingsError(f"{key}={value:g} is out of range: a finite number of {unit} above "
                            f"0{most}{none}")


def _text_problem(key: str, value: object, name: bool = False) -> str | None:
    """Why ``value`` cannot be a variable name (``name``) or value of a process environment."""
    if not isinstance(value, str):
        fix = f"; quote it ('+{key}=\"...\"')" if key.startswith("env.") else ""
        return f"{key}={value!r} is not text{fix}"
    if name and ("=" in value or "\0" in value or not value):
        return f"{key}: {value!r} is not a variable name (non-empty, without '=' or NUL)"
    return f"{key}={value!r} contains a NUL byte" if "\0" in value else None


def _texts(s: CoreSettings) -> None:
    """``env``, ``devices`` and ``device_env`` hold text a child's environment can carry:
    OmegaConf lets a list or a mapping into a ``dict[str, str]`` (``+env.X=[1,2]``)."""
    problems = [p for name, value in s.env.items()
                for p in (_text_problem("env", name, name=True),
                          _text_problem(f"env.{name}", value))]
    problems += [_text_problem(f"devices[{i}]", v) for i, v in enumerate(s.devices or [])]
    problems += [_text_problem(f"device_env[{i}]", v, name=True)
                 for i, v in enumerate(s.device_env)]
    problem = next((p for p in problems if p), None)
    if problem is not None:
        raise SettingsError(problem)


#: The most trials of one cell: each trial is a folder and a record, and a cell lists its trials
#: before it runs them (``trials=10**30`` would never start).
MAX_TRIALS = 100_000


def _ranges(s: CoreSettings) -> None:
    _positive(s)
    _texts(s)
    if s.trials < 1:
        raise SettingsError(f"trials={s.trials} must be 1 or more")
    if s.trials > MAX_TRIALS:
        raise SettingsError(f"trials={s.trials} is more than {MAX_TRIALS}, the most one cell runs")
    if s.devices_per_cell < 1:
        raise SettingsError(f"devices_per_cell={s.devices_per_cell} must be 1 or more")
    if s.devices is not None and len(s.devices) < s.devices_per_cell:
        raise SettingsError(
            f"devices_per_cell={s.devices_per_cell} is more than the {len(s.devices)} listed "
            "devices; list more devices or lower devices_per_cell")


def _resolved(cfg: DictConfig, key: str) -> object:
    """``cfg[key]`` with its interpolations resolved against the whole config."""
    node = cfg[key]
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, Container) else node


def core_settings(cfg: DictConfig) -> CoreSettings:
    """The core keys of a composed config, typed and range-checked; :class:`SettingsError`."""
    try:
        values = {f.name: _resolved(cfg, f.name) for f in fields(CoreSettings) if f.name in cfg}
        settings = OmegaConf.to_object(OmegaConf.merge(_SCHEMA, values))
    except OmegaConfBaseException as exc:
        raise SettingsError(_one_line(exc)) from None
    _ranges(settings)
    return settings
