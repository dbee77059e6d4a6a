"""Collector discovery: entry points of the group ``aorta.collectors``, loaded into pluggy.

Loading is tolerant (conda/sqlfluff style): a plugin that fails to import, misspells a hook or
describes itself wrongly, or that names a config package (``CollectorInfo.config_package``)
whose ``collector/<name>.yaml`` is missing or is not YAML (a wheel built without its package
data), is reported with its distribution, version and the fix, and the rest keep working.
``AORTA_STRICT_PLUGINS=1`` turns such a failure into an error; ``AORTA_LOAD_PLUGINS=a,b`` loads
only the named collectors (an allow-list) and ``AORTA_DISABLE_PLUGINS=a,b`` skips collectors by
name. Discovery uses ``importlib_metadata``, whose entry-point API is the same on every supported
Python.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, is_dataclass
from importlib.resources import files
from typing import Any

import pluggy
from importlib_metadata import EntryPoint, entry_points

from aorta_core.api import hookspecs
from aorta_core.api.contracts import CollectorInfo
from aorta_core.engine.isolation import load_in_process, naming

ENTRY_POINT_GROUP = "aorta.collectors"


class PluginLoadError(RuntimeError):
    """A collector plugin failed to load while ``AORTA_STRICT_PLUGINS=1`` is set."""


class CollectorConfigError(ValueError):
    """A collector's Hydra option cannot be found or read: a packaging mistake of its wheel."""


@dataclass(frozen=True)
class PluginStatus:
    """One row of ``aorta plugins``."""

    name: str
    distribution: str
    version: str
    status: str  # "ok", "error" or "disabled"
    error: str | None = None

    @property
    def unusable(self) -> str:
        """The line that says why a collector that failed to load cannot be used."""
        return (f"collector {self.name} ({self.distribution} {self.version}) is unusable: "
                f"{self.error}")


@dataclass(frozen=True)
class Collector:
    name: str
    info: CollectorInfo
    version: str


class Registry:
    """The loaded collectors and a way to call one collector's hook in isolation."""

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager
        self.collectors: dict[str, Collector] = {}
        self.statuses: list[PluginStatus] = []

    def call(self, name: str, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on collector ``name`` only; ``None`` when it does not implement it."""
        naming(name, hook)
        others = [p for n, p in self.manager.list_name_plugin() if n != name]
        results = self.manager.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
        return results[0] if results else None

    def wrap_order(self, names: list[str]) -> list[str]:
        """``names`` from the outermost wrapper to the innermost (smallest wrap_order first)."""
        return sorted(names, key=lambda n: (self.collectors[n].info.wrap_order, n))

    def versions(self) -> dict[str, str]:
        return {name: c.version for name, c in self.collectors.items()}


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    """The name and version of the distribution that installed ``ep``, from its metadata's
    header lines: ``dist.metadata`` parses the whole file with the email package (~10 ms of
    imports and parsing per call, which `aorta parse` paid twice per collector)."""
    dist = ep.dist
    text = (dist.read_text("METADATA") or dist.read_text("PKG-INFO")) if dist else None
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    return fields.get("Name") or "?", fields.get("Version") or "?"


def _register(registry: Registry, ep: EntryPoint, version: str, hydra: bool = True
              ) -> Collector:
    """Import and check one collector; ``hydra``: also check that a sweep's Hydra config can
    take its options and find its YAML (a tool that composes no config skips OmegaConf/YAML)."""
    naming(ep.name, "import")
    module = ep.load()
    registry.manager.register(module, name=ep.name)
    try:
        _check_hook_names(registry.manager, module)
        if ep.name not in {i.plugin_name
                           for i in registry.manager.hook.aorta_collector.get_hookimpls()}:
            raise TypeError(f"entry point {ep.name} = {ep.value!r} holds no aorta_collector "
                            f"hook: it must name the module of your @hookimpl functions, e.g. "
                            f"{ep.name} = {ep.module!r} ({PACKAGING_DOC})")
        info = registry.call(ep.name, "aorta_collector")
        if not isinstance(info, CollectorInfo):
            raise TypeError(f"aorta_collector() returned {type(info).__name__}, not CollectorInfo")
        if ep.name not in {i.plugin_name for i in registry.manager.hook.wrap_argv.get_hookimpls()}:
            raise TypeError("no wrap_argv hook: a collector must return the launch it measures "
                            "(unchanged when the workload measures itself)")
        if not (isinstance(info.options, type) and is_dataclass(info.options)):
            raise TypeError(f"CollectorInfo.options must be a dataclass type, not "
                            f"{info.options!r:.60}")
        if hydra:
            _check_options_type(info.options)
        if hydra and info.config_package is not None:  # else searchpath generates the option
            _check_option_file(ep.name, info.config_package)
    except BaseException:
        registry.manager.unregister(name=ep.name)
        raise
    return Collector(ep.name, info, version)


PACKAGING_DOC = "docs/plugins.md#packaging"


def _check_hook_names(manager: pluggy.PluginManager, module: Any) -> None:
    """pluggy's check that every ``@hookimpl`` names a hook, its error naming the plugin's file
    and the hook meant."""
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        found = re.match(r"unknown hook '([^']+)'", str(exc))
        if found is None:
            raise
        import difflib

        near = difflib.get_close_matches(found.group(1), [
            name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "aorta_spec")])
        where = getattr(module, "__file__", None) or repr(module)
        raise pluggy.PluginValidationError(exc.plugin, (
            f"unknown hook {found.group(1)!r} in {where}"
            + (f"; did you mean {near[0]}?" if near else "")
            + " (the hooks: docs/plugins.md#hooks)")) from None


def collector_options(schema: type, values: Mapping[str, Any] | Sequence[str] = ()) -> Any:
    """A collector's options dataclass: its defaults, or those with ``values`` (a mapping, as a
    record keeps them, or ``key=value`` words) merged and checked by OmegaConf as a sweep's
    are; OmegaConf (~80 ms of start-up) is imported only then. ``OmegaConfBaseException``
    names a value that does not fit."""
    if not values:
        return schema()
    from omegaconf import OmegaConf

    given = values if isinstance(values, Mapping) else OmegaConf.from_dotlist(list(values))
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), given))


def _check_options_type(options: object) -> None:
    """The options become a Hydra config node when a sweep starts: a type OmegaConf cannot take
    would end every sweep there, so it is this collector's load error instead."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        OmegaConf.structured(options)
    except OmegaConfBaseException as exc:
        raise TypeError(f"CollectorInfo.options {options.__name__} is not a valid config "
                        f"schema: {' '.join(str(exc).splitlines()[0].split())}") from None


def _check_option_file(name: str, package: str) -> None:
    """Hydra finds ``collector/<name>`` only in the config package: without this check a wheel
    built without its YAML loads ``ok`` and selecting it fails with Hydra's bare
    ``Could not find 'collector/<name>'``."""
    import yaml  # Hydra's own dependency; imported only when a collector loads

    option = f"collector/{name}.yaml"
    try:
        path = files(package).joinpath("collector", f"{name}.yaml")
    except (ImportError, TypeError, ValueError) as exc:
        raise CollectorConfigError(
            f"its config package {package!r} (CollectorInfo.config_package) cannot be imported "
            f"({exc}): ship it, every folder with an __init__.py ({PACKAGING_DOC})") from None
    if not path.is_file():
        raise CollectorConfigError(f"{option} is missing from package {package}: "
                                   f"add it as package data ({PACKAGING_DOC})")
    try:
        text = path.read_text(encoding="utf-8")
        yaml.safe_load(text)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CollectorConfigError(
            f"{option} of package {package} is not valid YAML{where}: "
            f"{getattr(exc, 'problem', None) or exc}; fix the file") from None
    if _package_header(text) != f"collector.{name}":
        # Without it the options land in `collector`, not `collector.<name>`: none would apply.
        raise CollectorConfigError(f"{option} of package {package} must start with the line "
                                   f"`# @package collector.{name}` ({PACKAGING_DOC})")


def _package_header(text: str) -> str | None:
    """The ``@package`` of a config as Hydra reads it: from the ``# @key value`` lines above
    the first other line (a plain comment above it hides it)."""
    for line in filter(None, map(str.strip, text.splitlines())):
        if not re.match(r"#\s*@", line):
            return None
        found = re.fullmatch(r"#\s*@package\s+(\S+)", line)
        if found:
            return found.group(1)
    return None


def _names(variable: str) -> set[str]:
    return {n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()}


def skipped(name: str) -> bool:
    """Disabled by ``AORTA_DISABLE_PLUGINS``, or left out of ``AORTA_LOAD_PLUGINS``."""
    allowed = _names("AORTA_LOAD_PLUGINS")
    return name in _names("AORTA_DISABLE_PLUGINS") or (bool(allowed) and name not in allowed)


def option_names() -> list[str]:
    """The installed collectors (not skipped), named from their entry points without importing
    any plugin: ``--help`` must not wait for a plugin whose import is slow. Every collector that
    loads has an option (its YAML or one generated from its options); whether each one loads:
    ``aorta plugins``."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)
                   if not skipped(ep.name)})


@functools.cache
def load_registry(only: str | None = None) -> Registry:
    """Load every installed collector once per process; with ``only``, just that collector (a
    tool that needs one, e.g. ``aorta parse``, imports no other plugin), without the checks
    that concern only a sweep's Hydra config (OmegaConf and YAML stay unimported)."""
    manager = pluggy.PluginManager("aorta")
    manager.add_hookspecs(hookspecs)
    registry = Registry(manager)
    strict = os.environ.get("AORTA_STRICT_PLUGINS", "") not in ("", "0")
    seen: set[str] = set()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if only is not None and ep.name != only:
            continue  # before its metadata is read: ~3 ms per distribution
        dist, version = _distribution(ep)
        if ep.name in seen:
            error = f"duplicate collector name {ep.name!r}; uninstall one of the distributions"
            registry.statuses.append(PluginStatus(ep.name, dist, version, "error", error))
            continue
        seen.add(ep.name)
        if skipped(ep.name):
            registry.statuses.append(PluginStatus(ep.name, dist, version, "disabled"))
            continue
        # Tried in a child first: an import that raises, exits or hangs costs only this
        # collector; then imported here, where the hooks' children find it.
        outcome = load_in_process(
            lambda e=ep, v=version: _register(registry, e, v, hydra=only is None))
        if outcome.failure is not None:
            if strict:
                raise PluginLoadError(
                    f"collector {ep.name!r} ({dist} {version}) failed to load: {outcome.failure} "
                    "(unset AORTA_STRICT_PLUGINS to load the others anyway)"
                ) from outcome.error
            registry.statuses.append(PluginStatus(ep.name, dist, version, "error",
                                                  outcome.failure))
            continue
        registry.collectors[ep.name] = outcome.value
        registry.statuses.append(PluginStatus(ep.name, dist, version, "ok"))
    return registry


#: How Hydra names a selected collector it has no option for: ``Could not find
#: 'collector/x'`` (``load`` in a list), or, when no collector has an option at all, ``Could not
#: override 'collector'. To append to your config use +collector=x`` (or ``=[x,y]``).
_NOT_FOUND = re.compile(r"Could not (?:find|load) 'collector/([^']+)'|use \+collector=(\S+)")


def unusable_selection(hydra_message: str) -> str | None:
    """The reason a selected collector is missing from Hydra's options, when it is installed but
    failed to load (Hydra says only that it has no such option)."""
    found = _NOT_FOUND.search(hydra_message)
    if found is None:
        return None
    names = (found.group(1) or found.group(2).strip("[]")).split(",")
    errors = {s.name: s for s in load_registry().statuses if s.status == "error"}
    status = next((errors[n.strip()] for n in names if n.strip() in errors), None)
    if status is None:
        return next(filter(None, map(_declared_elsewhere, names)), None)
    return status.unusable


def _declared_elsewhere(name: str) -> str | None:
    """Why collector ``name`` is not found when an installed distribution declares it in an
    entry-point group whose name is near :data:`ENTRY_POINT_GROUP` (``aorta.collector``): read
    only when a selection failed, since it reads every distribution's entry points."""
    import difflib

    from importlib_metadata import distributions

    for dist in distributions():
        for ep in dist.entry_points:
            if (ep.name == name.strip() and ep.group != ENTRY_POINT_GROUP
                    and difflib.get_close_matches(ep.group, [ENTRY_POINT_GROUP], cutoff=0.8)):
                return (f"collector {ep.name} is declared by {dist.metadata['Name']} "
                        f"{dist.version} in the entry-point group {ep.group!r}, which aorta does "
                        f"not read: name the group {ENTRY_POINT_GROUP!r} "
                        f"([project.entry-points.\"{ENTRY_POINT_GROUP}\"]) and install it again")
    return None
