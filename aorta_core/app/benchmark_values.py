"""The built-in benchmark's settings as a cell hands them over, composed by the benchmark's own
config before anything runs.

The workload config passes its keys to the benchmark's command line (``parallel=${workload.
parallel}``), which Hydra cannot check: ``workload.parallel=dpp`` composes, and every trial of
its cell then fails in the benchmark's own compose. Composing those arguments once per cell of
the plan refuses it first, naming the workload key and the choice that was meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aorta_core.app.help import config_options
from aorta_core.engine.argv import from_config
from aorta_core.engine.auto import AUTO, uses_workload
from aorta_core.engine.keys import not_a_choice

MODULE = "aorta_core.benchmark"
#: A command argument that hands a workload key to the benchmark: ``parallel=${workload.parallel}``.
_HANDED = re.compile(r"[\w.]+=\$\{(workload\.[\w.]+)\}")


@dataclass(frozen=True)
class Argument:
    """One ``key=value`` of the benchmark's command line, and the setting it comes from."""

    text: str
    #: ``workload.<key>`` that the value comes from; None: written in the command itself.
    given: str | None
    #: Whether the workload may leave it ``auto`` (a key of its ``auto`` profiles).
    may_be_auto: bool

    @property
    def key(self) -> str:
        return self.text.split("=", 1)[0]

    @property
    def value(self) -> str:
        return self.text.split("=", 1)[1]

    @property
    def name(self) -> str:
        """How the user calls it."""
        return self.given or self.key


def benchmark_arguments(cfg: DictConfig) -> tuple[Argument, ...]:
    """The benchmark's ``key=value`` arguments in a cell's command (``auto`` ones left out: the
    cell fills them from its machine); none when the cell runs no benchmark of its workload or
    passes it flags (``--config``) that only the benchmark reads."""
    if not uses_workload(cfg):
        return ()
    workload = cfg.workload
    raw = OmegaConf.to_container(workload, resolve=False).get("command")
    if not isinstance(raw, list) or MODULE not in raw:
        return ()
    profiles = OmegaConf.to_container(workload.get("auto") or {}, resolve=False)
    auto_keys = {key for profile in profiles.values() for key in profile}
    arguments = []
    for i in range(raw.index(MODULE) + 1, len(raw)):
        try:
            text = from_config(str(workload.command[i]))
        except OmegaConfBaseException:  # an interpolation that fails fails the cell, as it is
            return ()
        if "=" not in text or text.startswith("-"):
            return ()
        handed = _HANDED.fullmatch(str(raw[i]))
        given = handed.group(1) if handed else None
        argument = Argument(text, given, given is not None
                            and given.removeprefix("workload.") in auto_keys)
        if argument.value != AUTO:
            arguments.append(argument)
    return tuple(arguments)


def _choices(key: str) -> tuple[str, ...]:
    """The values the benchmark takes for ``key``: a config group's options, or its
    ``CHOICES``; empty for any other key."""
    from aorta_core.benchmark.config import CHOICES, CONFIG_MODULE

    if key in CHOICES:
        return CHOICES[key]
    return () if "." in key else tuple(config_options(CONFIG_MODULE, key))


def refusal(arguments: tuple[Argument, ...]) -> str | None:
    """Why the benchmark would refuse these arguments, in one line; None: it takes them."""
    for argument in arguments:
        choices = _choices(argument.key)
        if choices and argument.value not in choices:
            offered = [*choices, *([AUTO] if argument.may_be_auto and AUTO not in choices
                                   else [])]
            return not_a_choice(argument.name, argument.value, offered)
    from aorta_core.benchmark.config import ConfigError, compose_config

    try:
        compose_config([a.text for a in arguments])
    except (HydraException, OmegaConfBaseException, ConfigError) as exc:
        reason = "; ".join(str(part).splitlines()[0] for part in (exc, exc.__cause__)
                           if part is not None and str(part).strip())
        culprit = next((a for a in arguments
                        if re.search(rf"(?<![\w.]){re.escape(a.key)}=", reason)), None)
        if culprit is None:
            return f"the benchmark refuses its settings: {reason}"
        return f"{culprit.name}={culprit.value} is refused by the benchmark: {reason}"
    return None
