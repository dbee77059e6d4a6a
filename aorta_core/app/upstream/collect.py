"""A recipe's ``collect:`` (and ``--collect``) as aorta's collector overrides, checked at load.

Upstream validates every collector option and the collectors' conflicts with each other when it
loads the recipe. Here the recipe's options are merged into each collector's options dataclass
and passed to the collector's own ``check_options`` (the checks every aorta cell runs), so a bad
value is one line and exit status 2 before anything runs, as upstream has it.
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

from aorta_core.app.upstream.recipe import ProbeRecipe, RecipeError
from aorta_core.engine.grammar import quote

#: Upstream collectors with no aorta counterpart.
NO_COUNTERPART = {
    "numerics": "upstream's numerics checks have no aorta collector",
    "layer_numerics": "upstream's per-layer NaN logger has no aorta collector",
    "amd_log": "upstream's AMD log capture has no aorta collector; the trial's stderr.log "
               "keeps AMD_LOG_LEVEL output (diagnostic_axis: [amd_log_level_4])",
}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_HYDRA_WORDS = {"null", "true", "false", "nan", "inf"}


def _hydra_value(text: str) -> str:
    """``text`` as a Hydra override value that comes back as this exact string."""
    if _PLAIN.fullmatch(text) and text.lower() not in _HYDRA_WORDS:
        return text  # a plain word reads the same unquoted, and keeps the cell name readable
    return quote(text)


def _value(text: str, hint: Any) -> str | list[str]:
    """Upstream option values are strings; a list option takes upstream's comma/space list."""
    is_list = typing.get_origin(hint) is list or any(
        typing.get_origin(a) is list for a in typing.get_args(hint))
    return [v for v in re.split(r"[,\s]+", text) if v] if is_list else text


def _requested(recipe: ProbeRecipe, flag: list[str] | None, where: str
               ) -> dict[str, dict[str, Any]]:
    """Collector name -> recipe options; ``--collect`` keeps the options of the names it keeps."""
    raw = recipe.collect or []
    given = dict.fromkeys(raw, None) if isinstance(raw, list) else dict(raw)
    for name, opts in given.items():
        if opts is not None and not isinstance(opts, dict):
            raise RecipeError(f"{where}.{name}: options are a mapping of strings "
                              f"(e.g. {{trace: \"kernel,hip\"}}) or null, got "
                              f"{type(opts).__name__}")
    names = list(given) if flag is None else flag
    return {n: dict(given.get(n) or {}) for n in names}


def _options(path: Path, name: str, opts: dict[str, Any], cls: type) -> dict[str, Any]:
    """The recipe's options of collector ``name`` as typed values, unknown keys refused."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    values = {}
    for key, text in opts.items():
        if key not in known:
            raise RecipeError(f"{path}: collect.{name}.{key} is not an option of {name}; "
                              f"valid: {', '.join(sorted(known))}")
        if not isinstance(text, str):
            quoted = (f"write {key}: '{json.dumps(text)}'" if not isinstance(text, list | dict)
                      else "one string")  # a list may be an alias's 100,000 values
            raise RecipeError(f"{path}: collect.{name}.{key}: option values are strings "
                              f"({quoted}), got {type(text).__name__}")
        values[key] = _value(text, hints[key])
    return values


def _check(path: Path, where: str, options: dict[str, dict[str, Any]], registry) -> None:
    """Each collector's own option checks, with the others selected, as a cell makes them."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from aorta_core.engine.cells import ConfigError, valid_options
    from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S

    nodes = {}
    for name, values in options.items():
        try:
            nodes[name] = OmegaConf.merge(
                OmegaConf.structured(registry.collectors[name].info.options), values)
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", None) or "?"
            raise RecipeError(f"{path}: collect.{name}.{key}: {str(exc).splitlines()[0]}"
                              ) from None
    try:
        valid_options(OmegaConf.create({"collector": nodes}), registry, DEFAULT_HOOK_TIMEOUT_S)
    except ConfigError as exc:
        raise RecipeError(f"{where.removesuffix(': collect')}: {exc}") from None


def collector_overrides(path: Path, recipe: ProbeRecipe, flag: list[str] | None,
                        registry) -> list[str]:
    """``collector=...`` and ``collector.<name>.<option>=...`` for the requested collectors;
    :class:`RecipeError` for a collector or an option aorta cannot honour."""
    requested = _requested(recipe, flag, f"{path}: collect")
    where = "--collect" if flag is not None else f"{path}: collect"
    options = {}
    for name, opts in requested.items():
        if name in NO_COUNTERPART:
            raise RecipeError(f"{where}: {name}: {NO_COUNTERPART[name]}; remove it")
        collector = registry.collectors.get(name)
        if collector is None:
            installed = ", ".join(registry.collectors) or "none"
            raise RecipeError(
                f"{where}: {name} is not an installed collector (installed: {installed}); "
                "install the collector plugin of that name, or remove it")
        options[name] = _options(path, name, opts, collector.info.options)
    _check(path, where, options, registry)
    out = [f"collector={next(iter(options))}" if len(options) == 1
           else f"collector=[{','.join(options)}]"] if options else []
    for name, values in options.items():
        for key, value in values.items():
            shown = (f"[{','.join(map(_hydra_value, value))}]" if isinstance(value, list)
                     else _hydra_value(value))
            out.append(f"collector.{name}.{key}={shown}")
    return out
