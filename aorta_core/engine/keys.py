"""A key the config does not have, or a value none of a key's choices, named with the nearest
one that exists.

Hydra answers ``trails=1`` with "To append to your config use +trails=1", and following that
hint runs a cell named ``trails=1`` with the default three trials. aorta names the setting that
was meant instead: the core's keys, its config groups, the selected workload's and every installed
collector's options are the candidates.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

_HELP = "python -m aorta_core --help lists them"


def _dotted(node: Any, prefix: str) -> Iterator[str]:
    """Every key of a config tree, dotted (``workload.batch_size``)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = f"{prefix}{key}"
            yield path
            yield from _dotted(value, f"{path}.")


def _collector_options() -> dict[str, str]:
    """``collector.<name>.<option>`` -> ``<name>`` for every installed collector."""
    from aorta_core.engine.plugins import load_registry

    return {f"collector.{name}.{f.name}": name
            for name, collector in load_registry().collectors.items()
            for f in dataclasses.fields(collector.info.options)}


def _groups(cfg: DictConfig | None) -> list[str]:
    """The config groups a user selects (``collector``, ``hydra/launcher``): a config that
    selects none of a group's options has no key of that name. aorta's own groups
    (``aorta_cli``) are no one's typo."""
    if cfg is None:
        return []
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return [group for group in choices if not group.startswith("aorta_")]


def suggestion(key: str, cfg: DictConfig | None) -> str | None:
    """The existing key or config group nearest to ``key`` at the same depth (``cfg``: the config
    without it)."""
    tree = OmegaConf.to_container(cfg, resolve=False) if cfg is not None else {}
    if not key.startswith("hydra."):
        tree.pop("hydra", None)
    depth = key.count(".")
    known = [k for k in (*_dotted(tree, ""), *_collector_options(), *_groups(cfg))
             if k.count(".") == depth]
    return nearest(key, known)


def unselected_option(key: str, collector: str) -> str:
    """The one line for an option ``key`` (or options, ``collector.<name>``) of a collector that
    no cell of the sweep selects."""
    return (f"{key} is given, but no cell selects collector {collector}: add "
            f"collector={collector} (or collector=[{collector},...] with others, or "
            f"-m collector={collector},... to sweep it)")


def not_a_setting(key: str, cfg: DictConfig | None, fix: str = _HELP) -> str:
    """The one line for ``key``, which ``cfg`` (the config composed without it) lacks; ``fix``
    is said when no key is near."""
    options = _collector_options()
    if key in options:
        return unselected_option(key, options[key])
    near = suggestion(key, cfg)
    if near:
        return f"{key} is not a setting; did you mean `{near}`?"
    return f"{key} is not a setting ({fix})"


def nearest(value: str, choices: Sequence[str]) -> str | None:
    """The choice a mistyped ``value`` most likely meant."""
    near = difflib.get_close_matches(value, choices, n=1)
    return near[0] if near else None


def not_a_choice(key: str, value: str, choices: Sequence[str]) -> str:
    """The one line for ``key=value`` where ``value`` is none of ``choices``."""
    near = nearest(value, choices)
    fix = f"did you mean `{key}={near}`?" if near else "choose one of them"
    return f"{key}={value} is not one of {', '.join(choices)}; {fix}"
