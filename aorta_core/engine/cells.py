"""From a composed Hydra job config to a validated :class:`Cell`."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aorta_core.api.contracts import OptionError, SetupError
from aorta_core.api.oneline import exception_line
from aorta_core.engine.argv import from_config
from aorta_core.engine.auto import AutoChoice, AutoError, resolve, uses_workload
from aorta_core.engine.claims import claims_of, conflict
from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S, call_hook
from aorta_core.engine.plugins import Registry
from aorta_core.engine.settings import CoreSettings, SettingsError, core_settings

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]+")
_APPEND = re.compile(r"(^|,)[+~]+")
_MAX_NAME = 100


@dataclass(frozen=True)
class Cell:
    """Everything that is the same for all trials of one cell of the sweep."""

    name: str
    directory: Path
    axes: Mapping[str, str]
    command: tuple[str, ...]
    env: Mapping[str, str]
    #: name -> options dataclass instance, for the selected collectors.
    collectors: Mapping[str, Any]
    timeout_s: float | None
    retain: Mapping[str, str]
    fingerprint: str
    #: What ``auto`` workload settings became on this machine (None: the cell has none).
    auto: AutoChoice | None = None
    #: Seconds each collector hook may take (``hook_timeout``; None: no limit).
    hook_timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S
    #: Write each trial's merged timeline (``timeline=true``).
    timeline: bool = False
    #: Write each trial's diagnosis.json (``diagnose=true``).
    diagnose: bool = False
    #: MiB kept of each trial log (``log_limit_mb``; None: whole).
    log_limit_mb: float | None = None
    #: Which recorded trials run again (``retry``: none, errored, failed).
    retry: str = "errored"

    def trial_dir(self, index: int) -> Path:
        return self.directory / f"trial_{index:03d}"


class ConfigError(ValueError):
    """The cell's config cannot run; the message names the key and the fix."""


def cell_name(override_dirname: str) -> str:
    """A folder-safe, stable name for the cell from its (sorted) overrides."""
    if not override_dirname:
        return "default"
    readable = _APPEND.sub(r"\1", override_dirname)  # `+env.X=1` reads as `env.X=1`
    name = _UNSAFE.sub("_", readable).strip("._") or "cell"
    if len(name) > _MAX_NAME or name != readable:
        digest = hashlib.sha1(override_dirname.encode()).hexdigest()[:8]
        name = f"{name[:_MAX_NAME]}-{digest}"
    return name


def axes_of(task_overrides: list[str], excluded: list[str]) -> dict[str, str]:
    """The cell's coordinates: every task override except the sweep-level keys."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    axes = {}
    for override in OverridesParser.create().parse_overrides(task_overrides):
        if override.key_or_group in excluded:
            continue
        axes[override.key_or_group] = override.get_value_element_as_str()
    return dict(sorted(axes.items()))


def _command(cfg: DictConfig) -> tuple[str, ...]:
    command = OmegaConf.to_container(cfg, resolve=True).get("command")
    if not command:
        raise ConfigError(
            "no command to run: put one after `--` (python -m aorta_core sweep=repeat -- "
            "python train.py) or choose a recipe/workload that names one"
        )
    if not isinstance(command, list) or not all(isinstance(a, (str, int, float)) for a in command):
        raise ConfigError(f"command must be a list of strings, got {command!r}")
    return tuple(from_config(str(a)) for a in command)


def typed_options(cfg: DictConfig, registry: Registry) -> dict[str, Any]:
    """The selected collectors' options as their dataclasses; :class:`ConfigError` names a
    collector that is not installed, a key it does not have (``+`` appends one even to a
    structured node) and a value that does not resolve (``${oc.env:UNSET}``).

    Options of a collector this cell does not select (a plain mapping: ``-m collector=a,b
    collector.b.k=1`` gives them to cell ``a`` too) are not its own and are left out; the
    sweep's pre-check refuses options that no cell selects (:func:`unselected_options`)."""
    options = {}
    for name, node in (cfg.get("collector") or {}).items():
        collector = registry.collectors.get(name)
        if collector is None:
            raise ConfigError(
                f"collector {name!r} is not installed or failed to load; see `aorta plugins`"
            )
        known = {f.name for f in dataclasses.fields(collector.info.options)}
        unknown = sorted(set(node or {}) - known)
        if unknown:
            raise ConfigError(f"collector.{name}.{unknown[0]} is not an option of {name}; "
                              f"valid: {', '.join(sorted(known))}")
        if OmegaConf.get_type(node) is not collector.info.options:
            continue
        try:
            options[name] = OmegaConf.to_object(node)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"collector.{name}: {' '.join(str(exc).splitlines()[0].split())}"
                              ) from None
    return options


def collector_selection(cfg: DictConfig, registry: Registry) -> tuple[set[str], set[str]]:
    """Which installed collectors ``cfg`` selects, and which it only gives options to."""
    selected, given = set(), set()
    for name, node in (cfg.get("collector") or {}).items():
        collector = registry.collectors.get(name)
        if collector is not None:
            chosen = OmegaConf.get_type(node) is collector.info.options
            (selected if chosen else given).add(name)
    return selected, given


def checked_collectors(cfg: DictConfig, registry: Registry, timeout_s: float | None
                       ) -> dict[str, Any]:
    """The selected collectors' options (:func:`valid_options`), each able to measure on this
    machine, where the cell's trials run (``check_machine``)."""
    options = valid_options(cfg, registry, timeout_s)
    for name, opts in options.items():
        line = _machine_refusal(name, opts, registry, timeout_s, failed_too=True)
        if line is not None:
            raise ConfigError(line)
    return options


def _machine_refusal(name: str, options: Any, registry: Registry, timeout_s: float | None,
                     failed_too: bool) -> str | None:
    """Why collector ``name`` cannot measure here (its ``check_machine`` raised SetupError);
    ``failed_too``: also a check that failed otherwise. None when it can."""
    outcome = call_hook(lambda: registry.call(name, "check_machine", options=options) and None,
                        timeout_s)  # its answer is not used: none is sent back
    if isinstance(outcome.error, SetupError):
        return (f"collector {name} cannot measure on this machine: "
                f"{exception_line(outcome.error).removeprefix('SetupError: ')}")
    if failed_too and outcome.failure is not None:
        return f"collector.{name}: check_machine failed: {outcome.failure}"
    return None


def valid_options(cfg: DictConfig, registry: Registry, timeout_s: float | None
                  ) -> dict[str, Any]:
    """The selected collectors' options (:func:`typed_options`), each checked by its collector
    (``check_options``, with the others selected), and refused together when what they claim
    collides (``resource_claims``): a cell's and an upstream recipe's ``collect:`` alike."""
    options = typed_options(cfg, registry)
    claims = {}
    for name, opts in options.items():
        outcome = call_hook(lambda n=name, o=opts: _check_options(registry, n, o, options),
                            timeout_s)
        if isinstance(outcome.error, OptionError):  # a plugin's words, kept on one line
            raise ConfigError(_named(name, " ".join(str(outcome.error).split())))
        if outcome.failure is not None:
            raise ConfigError(f"collector.{name}: check_options failed: {outcome.failure}")
        outcome = call_hook(lambda n=name, o=opts: claims_of(registry.call(
            n, "resource_claims", options=o)), timeout_s)
        if outcome.failure is not None:
            raise ConfigError(f"collector.{name}: resource_claims failed: {outcome.failure}")
        claims[name] = outcome.value
    refusal = conflict(claims)
    if refusal is not None:
        raise ConfigError(refusal)
    return options


def _check_options(registry: Registry, name: str, options: Any, selected: Mapping[str, Any]
                   ) -> None:
    """In the hook's process: ``check_options``, whose answer (if any) is not used."""
    registry.call(name, "check_options", options=options, selected=selected)


#: Hydra launchers that run every cell on this machine: Hydra's own, joblib's, submitit's local.
LOCAL_LAUNCHERS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",
                   "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
                   "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher")


def unmeasurable_here(cfgs: list[DictConfig], registry: Registry, timeout_s: float | None
                      ) -> str | None:
    """Why a collector selected by one of the sweep's composed configs ``cfgs`` cannot measure
    on this machine, when their cells run here (a local launcher; with Slurm each cell checks
    the node it runs on); ``None`` when every one can. A config its cell refuses for another
    reason, and a ``check_machine`` that fails otherwise, are left to the cell."""
    checked = set()
    for cfg in [c for c in cfgs if c.hydra.launcher.get("_target_") in LOCAL_LAUNCHERS]:
        try:
            options = valid_options(cfg, registry, timeout_s)
        except ConfigError:
            continue  # its cell refuses it, naming the option
        for name, opts in options.items():
            if (name, repr(opts)) not in checked:
                checked.add((name, repr(opts)))
                line = _machine_refusal(name, opts, registry, timeout_s, failed_too=False)
                if line is not None:
                    return line
    return None


def _named(collector: str, message: str) -> str:
    """An option error that names its collector: as written when it starts with the key
    (``collector.x.key=...``), else after ``collector.x: ``."""
    key = f"collector.{collector}"
    return message if re.match(rf"{re.escape(key)}(?:[.:= ]|$)", message) else f"{key}: {message}"


def _inside_output(directory: Path, output: Path) -> Path:
    """The cell's folder, refused when it (or a link on the way) leads out of ``output``."""
    if directory.is_symlink() or not directory.resolve().is_relative_to(output.resolve()):
        raise ConfigError(f"the cell folder {directory} is outside output={output} (a link, or "
                          "hydra.sweep.subdir leading out); aorta writes only inside output")
    return directory


def _fingerprint(command: tuple[str, ...], env: dict[str, str], collectors: Mapping) -> str:
    """Hash of what makes trials of a cell comparable, checked on resume."""
    data = {"command": command, "env": env, "collectors": sorted(collectors)}
    try:
        raw = msgspec.json.encode(data, order="sorted")
    except UnicodeEncodeError:  # undecodable bytes in the argv arrive surrogate-escaped
        raw = repr(sorted(data.items())).encode("utf-8", "backslashreplace")
    return hashlib.sha256(raw).hexdigest()[:16]


def _auto(cfg: DictConfig, env: dict[str, str], settings: CoreSettings) -> AutoChoice | None:
    """Fill ``auto`` workload settings for the GPUs this cell will see (its device slot too)."""
    if not uses_workload(cfg):
        return None
    seen = dict(env)
    if settings.devices is not None:
        seen.update(dict.fromkeys(settings.device_env, ",".join(["x"] * settings.devices_per_cell)))
    try:
        return resolve(cfg, seen)
    except AutoError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class Place:
    """Where a cell stands in the sweep: its name, folder and axis values."""

    name: str
    directory: Path
    axes: Mapping[str, str]


def place_of(hydra_cfg: Any) -> Place:
    """The place Hydra gave this job: one job is one cell. Its folder is read from the sweep
    settings, not from ``hydra.runtime.output_dir``: Hydra stores that as config text, where a
    ``${`` of a folder name would be interpolated."""
    from hydra.types import RunMode

    folder = (Path(hydra_cfg.sweep.dir) / hydra_cfg.sweep.subdir
              if hydra_cfg.mode == RunMode.MULTIRUN else Path(hydra_cfg.run.dir))
    excluded = list(hydra_cfg.job.config.override_dirname.exclude_keys)
    return Place(cell_name(hydra_cfg.job.override_dirname), folder.absolute(),
                 axes_of(list(hydra_cfg.overrides.task), excluded))


def build_cell(cfg: DictConfig, place: Place, registry: Registry) -> Cell:
    """Validate the job config and describe its cell; raises :class:`ConfigError`."""
    try:
        settings = core_settings(cfg)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    env = dict(settings.env)
    auto = _auto(cfg, env, settings)
    command = _command(cfg)
    collectors = checked_collectors(cfg, registry, settings.hook_timeout)
    return Cell(
        name=place.name,
        directory=_inside_output(place.directory, Path(str(cfg.output))),
        axes=dict(place.axes),
        command=command,
        env=env,
        collectors=collectors,
        timeout_s=settings.timeout,
        retain=settings.retain_levels(),
        fingerprint=_fingerprint(command, env, collectors),
        auto=auto,
        hook_timeout_s=settings.hook_timeout,
        timeline=settings.timeline,
        diagnose=settings.diagnose,
        log_limit_mb=settings.log_limit_mb,
        retry=settings.retry.value,
    )
