"""Compose the config once before Hydra runs, so that a mistake is one line naming the problem and
the fix (exit status 2) instead of Hydra's multi-line report, or a sweep that runs the wrong thing.

Caught here: an unknown recipe, workload, collector or launcher (with the option meant: "did you
mean `sweep=grid`?"); a mistyped or ill-typed option, swept values too (each is composed once); a
key or config group that is no setting (``trails=1``, ``+trails=1``, ``colector=x``: "did you mean
`trials`?"); a collector key that does not exist (``+collector.x.typo=1``, which Hydra lets
through); a value the built-in benchmark refuses (``workload.parallel=dpp``, composed by the
benchmark's own config); a key given twice (Hydra would keep the last); a flag Hydra does not take;
a bare word where an override was expected (a command without ``--``); a command after ``--`` with
the default recipe, whose axes are the benchmark's; a recipe that needs a command and got none; a
collector that cannot measure on this machine when the cells run here (``check_machine``). A
core setting's swept value (``trials=1,abc``) is refused by its cell alone, when the job is
composed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from hydra import compose, initialize_config_module
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from aorta_core.app.benchmark_values import Argument, benchmark_arguments, refusal
from aorta_core.engine.cells import (
    ConfigError,
    collector_selection,
    typed_options,
    unmeasurable_here,
)
from aorta_core.engine.grammar import Axis, SweepError, quote, sweep_axes
from aorta_core.engine.keys import nearest, not_a_setting, suggestion, unselected_option
from aorta_core.engine.plugins import load_registry, unusable_selection
from aorta_core.engine.settings import CoreSettings, SettingsError, core_settings

#: Flags that replace the primary config; with them the pre-check cannot compose what Hydra will.
_PRIMARY_FLAGS = ("--config-path", "-cp", "--config-name", "-cn")
_DIR_FLAGS = ("--config-dir", "-cd")
#: Hydra flags followed by a value that is not an override.
_VALUE_FLAGS = (*_PRIMARY_FLAGS, *_DIR_FLAGS, "--cfg", "-c", "--package", "-p", "--info", "-i",
                "--experimental-rerun")
_HELP = " (python -m aorta_core --help lists recipes, workloads and collectors)"


OUTPUT_KEYS = ("output=", "+output=", "++output=")


class UsageError(ValueError):
    """The command line cannot make a sweep; the message is the one line to show: a line break or
    other control character quoted from the command line is shown escaped (``\\n``)."""

    def __init__(self, message: str) -> None:
        super().__init__(_UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], message))


#: What would end or garble a terminal line: control characters, line and paragraph separators,
#: lone surrogates (bytes of the command line that are not UTF-8).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _override_places(args: list[str]) -> list[int]:
    """Where the ``key=value`` arguments are: not flags, nor the value that follows a flag."""
    return [i for i, a in enumerate(args)
            if "=" in a and not a.startswith("-") and not (i and args[i - 1] in _VALUE_FLAGS)]


def without_output(args: list[str]) -> list[str]:
    """``args`` without ``output=<dir>``, which aorta passes to Hydra itself, quoted."""
    given = {i for i in _override_places(args) if args[i].startswith(OUTPUT_KEYS)}
    return [a for i, a in enumerate(args) if i not in given]


def _output(args: list[str]) -> Path | None:
    """``output=<dir>``, read once and whole (a path may hold ``,``, ``=``, quotes, brackets,
    ``${``: it never goes through Hydra's grammar unquoted), made absolute."""
    given = [args[i] for i in _override_places(args) if args[i].startswith(OUTPUT_KEYS)]
    if len(given) > 1:
        raise _given_twice("output", given)
    if not given:
        return None
    value = given[0].split("=", 1)[1]
    if not value.strip():
        raise UsageError("output= is empty (an unset shell variable?); give the sweep's folder: "
                         "output=<dir>, or leave output= out for aorta_runs/<timestamp>")
    output = Path.cwd() / value  # an absolute value stays as it is
    try:
        str(output).encode("utf-8")
        output.exists()  # a name longer than the file system allows raises here, not False
    except UnicodeEncodeError:
        raise UsageError(f"output={value!r} is not UTF-8 text, which the matrix and the reports "
                         "name their files in; choose a folder name in UTF-8") from None
    except OSError as exc:
        raise UsageError(f"output={value!r} cannot be a folder ({exc.strerror}); choose another "
                         "output=<dir>") from None
    return output


@dataclass(frozen=True)
class Plan:
    """What the driver needs from the composed config."""

    allow_failures: bool = False
    #: Which recorded trials run again (``retry``).
    retry: str = "errored"
    #: In which order the trials run (``order``), and how many each cell runs (``trials``).
    order: str = "cells"
    trials: int = 3
    #: ``output=<dir>`` made absolute; None: not given.
    output: Path | None = None
    #: The keys the sweep varies: what tells its cells apart.
    swept: tuple[str, ...] = ()
    #: The overrides for Hydra: without ``output=``, a collector's options that only some cells
    #: select given to every cell (``++``).
    hydra_args: tuple[str, ...] = ()
    #: Hydra's flags (``-m``, ``--cfg job``), for after every override: Hydra's parser reads the
    #: overrides as one run of arguments, wherever the user put the flags.
    flags: tuple[str, ...] = ()


def hydra_line(exc: BaseException) -> str:
    """Hydra's error in one line: its lines joined, without the config search path; an option
    that Hydra cannot find because its collector failed to load says why."""
    unusable = unusable_selection(str(exc))
    if unusable:
        return unusable
    lines = []
    for part in (exc, exc.__cause__):
        if part is None:
            continue
        for line in str(part).splitlines():
            line = line.strip()
            if line.startswith("Config search path"):
                break
            if line and not line.startswith("provider=") and line not in lines:
                lines.append(line)
    head = next((i for i, line in enumerate(lines) if line.endswith(":")), len(lines))
    text = "; ".join(lines[: head + 1])
    if head < len(lines) - 1:  # "Available options in 'sweep':" then one option per line
        text += " " + ", ".join(lines[head + 1 :])
    return text + (_meant_option(exc) or _HELP)


def _meant_option(exc: BaseException) -> str | None:
    """``; did you mean `sweep=grid`?`` for Hydra's "Could not find 'sweep/gird'"."""
    if not isinstance(exc, MissingConfigException) or not exc.options \
            or not exc.missing_cfg_file:
        return None
    group, _, value = exc.missing_cfg_file.rpartition("/")
    near = nearest(value, exc.options)
    return f"; did you mean `{group}={near}`?" if near else None


def _bare_word(args: list[str]) -> None:
    for i, arg in enumerate(args):
        if arg.startswith("-") or "=" in arg or (i and args[i - 1] in _VALUE_FLAGS):
            continue
        before = shlex.join(args[:i]) or "sweep=repeat"
        raise UsageError(
            f"{arg!r} is not an override (key=value): put the workload command after `--`, "
            f"e.g. python -m aorta_core {before} -- {shlex.join(args[i:])}"
        )


#: Where cells are written is aorta's: ``output=<dir>`` decides, Hydra's keys must not.
#: Where Hydra writes (folders, its .hydra/ copies, the job log's name and handler): set by aorta
#: so that nothing is written outside the output.
_OWNED = ("hydra.sweep.dir", "hydra.sweep.subdir", "hydra.run.dir", "hydra.output_subdir",
          "hydra.job.name", "hydra.job_logging.handlers.file")


def _owned_keys(args: list[str]) -> None:
    for arg in args:
        key = arg.lstrip("+~").split("=", 1)[0]
        if any(key == owned or key.startswith(f"{owned}.") for owned in _OWNED):
            raise UsageError(f"{arg.split('=', 1)[0]} is set by aorta (cells and their logs go "
                             "to <output>/cells/<cell>); choose the folder with output=<dir>")


def _search_dirs(args: list[str]) -> list[str]:
    """``--config-dir D`` / ``-cd D`` / ``--config-dir=D`` as the search path Hydra will add."""
    dirs = []
    for i, arg in enumerate(args):
        if arg in _DIR_FLAGS and i + 1 < len(args):
            dirs.append(args[i + 1])
        elif arg.startswith(tuple(f"{f}=" for f in _DIR_FLAGS)):
            dirs.append(arg.split("=", 1)[1])
    return [quote(f"file://{Path(d).resolve()}", resolved=False) for d in dirs]


def _collector_keys(cfg: DictConfig) -> None:
    """The collectors' options typed as a cell types them (a mistyped key, a collector given
    options but not selected, a value that does not resolve), before anything is written."""
    try:
        typed_options(cfg, load_registry())
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _selected_somewhere(composer: Composer) -> None:
    """Options of a collector that no cell of the sweep selects would be used nowhere."""
    for name in sorted(composer.given - composer.selected):
        key = next((line.split("=", 1)[0] for line in composer.forced
                    if line.startswith(f"collector.{name}.")), f"collector.{name}")
        raise UsageError(unselected_option(key, name))


def _measurable_here(composer: Composer, settings: CoreSettings) -> None:
    """A selected collector that cannot measure on this machine, where the cells will run, stops
    the sweep before anything is written (``check_machine``)."""
    try:
        line = unmeasurable_here(composer.configs, load_registry(), settings.hook_timeout)
    except ConfigError as exc:
        line = str(exc)
    if line is not None:
        raise UsageError(line)


def _command_given(settings: CoreSettings, args: list[str], command: list[str] | None) -> None:
    if not settings.requires_command or command is not None:
        return
    if any(a.split("=", 1)[0].lstrip("+~") in ("workload", "command") for a in args):
        return
    recipe = next((a.split("=", 1)[1] for a in args if a.startswith("sweep=")), "this recipe")
    raise UsageError(
        f"sweep={recipe} runs the command after `--`, and none was given: "
        f"python -m aorta_core sweep={recipe} -- python train.py (or name one: workload=benchmark)"
    )


_BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
_MISSING_KEY = re.compile(r"Could not override '([^']+)'")


def _collector_of(key: str) -> str | None:
    """The installed collector whose option ``key`` is, written plainly:
    ``collector.<name>.<option>``."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[0] == "collector" and parts[1] in load_registry().collectors:
        return parts[1]
    return None


class Composer:
    """Composes the command line as Hydra's basic sweeper will, so that what Hydra would report
    after writing ``multirun.yaml`` is one line before anything is written: the command line
    once, then each swept value once (every other axis at its first value)."""

    def __init__(self, parsed: list[Override], extra: list[str]) -> None:
        self.parsed, self.extra = parsed, extra
        self.plain = [o.input_line for o in parsed if not o.is_sweep_override()] + extra
        self.recipe = next((o.value() for o in parsed if o.key_or_group == "sweep"), "default")
        #: Keys swept by the recipe's ``hydra.sweeper.params`` alone (not on the command line).
        self.recipe_axes: set[str] = set()
        #: ``collector.<name>.<key>=v`` -> ``++...``: options of a collector that only some cells
        #: select, given to every cell (Hydra refuses to set them where it is not selected).
        self.forced: dict[str, str] = {}
        #: Collectors some composed cell selects; collectors some cell only gives options to.
        self.selected: set[str] = set()
        self.given: set[str] = set()
        #: The built-in benchmark's arguments of each composed cell, each set once.
        self.benchmark: dict[tuple[Argument, ...], None] = {}
        #: Every config composed, for the collectors' machine checks.
        self.configs: list[DictConfig] = []

    def compose(self, overrides: list[str]) -> DictConfig:
        overrides = [self.forced.get(o, o) for o in overrides]
        try:
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
        except (HydraException, OmegaConfBaseException) as exc:
            line = self._other_cells_option(exc, overrides)
            if line is None:
                raise UsageError(self._explain(exc, overrides)) from None
            self.forced[line] = f"++{line}"
            return self.compose(overrides)
        except ValueError as exc:  # Hydra's own check of a config group's value (`collector=null`)
            nulls = [o.split("=", 1)[0] for o in overrides if o.endswith("=null")]
            if nulls:
                raise UsageError(f"{nulls[0]}=null: a config group takes one of its options, not "
                                 f"null; leave {nulls[0]}= out to select none{_HELP}") from None
            raise UsageError(f"{' '.join(str(exc).split())}{_HELP}") from None
        selected, given = collector_selection(cfg, load_registry())
        self.selected |= selected
        self.given |= given
        self.benchmark[benchmark_arguments(cfg)] = None
        self.configs.append(cfg)
        return cfg

    def _other_cells_option(self, exc: BaseException, overrides: list[str]) -> str | None:
        """The override ``collector.<name>.<key>=v`` that Hydra could not set because this
        composition does not select collector ``<name>`` (another cell of the sweep may)."""
        missing = _MISSING_KEY.match(str(exc))
        if not missing or not isinstance(exc.__cause__, (ConfigAttributeError, ConfigKeyError)):
            return None
        key = missing.group(1)
        line = next((o for o in overrides if o.split("=", 1)[0] == key), None)
        if line is None or _collector_of(key) is None:
            return None
        try:  # which collectors this composition selects: its collector= choices decide
            without = compose("config", overrides=[o for o in overrides
                                                   if _collector_of(o.split("=", 1)[0]) is None],
                              return_hydra_config=True)
        except (HydraException, OmegaConfBaseException):
            return None
        selected, _ = collector_selection(without, load_registry())
        return None if _collector_of(key) in selected else line  # selected: no option of it

    def _explain(self, exc: BaseException, overrides: list[str]) -> str:
        missing = _MISSING_KEY.match(str(exc))
        if missing and isinstance(exc.__cause__, (ConfigAttributeError, ConfigKeyError)) \
                and not unusable_selection(str(exc)):
            key = missing.group(1)
            rest = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] != key]
            try:
                without = compose("config", overrides=rest, return_hydra_config=True)
            except (HydraException, OmegaConfBaseException):
                without = None
            if key in self.recipe_axes:
                return (f"the recipe sweep={self.recipe} sweeps {key}, which this config does "
                        "not have (another workload?): choose a recipe for it, e.g. "
                        "sweep=repeat; python -m aorta_core --help lists them")
            return not_a_setting(key, without)
        return hydra_line(exc)

    def base(self) -> DictConfig:
        """The config of the command line's plain overrides; a key of the user's own that no
        config has (``+trails=1``) is refused unless it is swept to label replicate cells
        (``+cell=1,2``) and is no near miss of a setting."""
        cfg = self.compose(self.plain)
        added = [o for o in self.parsed if (o.is_add() or o.is_force_add())
                 and not re.search(r"[./]", o.key_or_group) and not o.is_hydra_override()
                 and not GlobalHydra.instance().config_loader().get_group_options(
                     o.key_or_group)]
        if not added:
            return cfg
        without = self.compose([line for line in self.plain
                                if line not in {o.input_line for o in added}])
        for override in added:
            key = override.key_or_group
            if key in without:
                continue
            label = override.is_sweep_override() and suggestion(key, without) is None
            if not label:
                raise UsageError(not_a_setting(
                    key, without, f"a key of your own only labels replicate cells, swept: "
                                  f"+{key}=a,b; python -m aorta_core --help lists the settings"))
        return cfg

    def axes(self, cfg: DictConfig) -> list[Axis]:
        """The swept axes, each of their values composed once."""
        if cfg.hydra.sweeper.get("_target_") != _BASIC_SWEEPER:
            return []  # another sweeper reads its own sweep syntax
        params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.get("params") or {}).items()]
        self.recipe_axes = set(cfg.hydra.sweeper.get("params") or {}) - {
            o.key_or_group for o in self.parsed}
        loader = GlobalHydra.instance().config_loader()
        try:
            overrides = OverridesParser.create(config_loader=loader).parse_overrides(
                params + [o.input_line for o in self.parsed])
        except (HydraException, OmegaConfBaseException) as exc:
            raise UsageError(hydra_line(exc)) from None
        for override in overrides:
            if override.is_sweep_override() and not override.is_discrete_sweep():
                raise UsageError(f"{override.input_line}: the basic sweeper sweeps lists, "
                                 "choice(), range() and glob(); give the values as a,b,c")
        try:
            axes = sweep_axes(overrides)
        except SweepError as exc:
            raise UsageError(str(exc)) from None
        first = [a.values[0] for a in axes]
        self.compose([*first, *self.extra])
        for i, axis in enumerate(axes):
            for value in () if axis.added else axis.values[1:]:
                self.compose([*first[:i], value, *first[i + 1:], *self.extra])
        return [a for a in axes if a.swept]


def _named_keys(parsed: list[Override]) -> None:
    """``=1`` or ``+=x``: Hydra reads a config group named "" (an assertion error deep inside)."""
    for override in parsed:
        if not override.key_or_group:
            raise UsageError(f"{override.input_line!r} names no key; give key=value, e.g. "
                             "trials=1")


def _default_recipe_with_command(args: list[str], command: list[str] | None) -> None:
    """The default recipe sweeps the benchmark's FSDP/DDP axes: over the user's own command it
    would run identical cells labelled fsdp and ddp."""
    if command is None or any(a.lstrip("+").split("=", 1)[0] == "sweep" for a in args):
        return
    before = shlex.join(args)
    raise UsageError(
        "a command after `--` needs a recipe that runs it (the default recipe sweeps the "
        f"benchmark's fsdp/ddp axes): python -m aorta_core sweep=repeat {before}"
        f"{' ' if before else ''}-- {shlex.join(command)}"
    )


def _given_twice(key: str, given: list[str]) -> UsageError:
    return UsageError(f"{key}= is given {len(given)} times ({shlex.join(given)}); Hydra would "
                      "silently keep the last: give it once")


def _given_once(args: list[str]) -> None:
    """A key given twice (``trials=1 trials=2``): Hydra would silently keep the last value."""
    given: dict[str, list[str]] = {}
    for i in _override_places(args):
        given.setdefault(args[i].split("=", 1)[0].lstrip("+~"), []).append(args[i])
    for key, lines in given.items():
        if len(lines) > 1:
            raise _given_twice(key, lines)


def _refuse_flag(message: str) -> NoReturn:
    raise UsageError(f"{message}; aorta takes key=value overrides and Hydra's flags "
                     "(python -m aorta_core --hydra-help lists them)")


def _hydra_flags(args: list[str]) -> list[str]:
    """The arguments that are Hydra's flags (``-m``, ``--cfg job``), read as Hydra will read them
    (an unknown one is one line here, not Hydra's usage after the output folder is made)."""
    places = set(_override_places(args))
    flags = [a for i, a in enumerate(args) if i not in places]
    parser = get_args_parser()
    parser.error = _refuse_flag
    parser.parse_args(flags)
    return flags


def check(args: list[str], command: list[str] | None) -> Plan:
    """Compose ``args`` as Hydra will, each swept value too; raise :class:`UsageError` with the
    reason it cannot run, before anything is written."""
    _bare_word(args)
    _owned_keys(args)
    output = _output(args)
    flags = tuple(_hydra_flags(args))
    rest = without_output(args)
    overrides = [rest[i] for i in _override_places(rest)]
    if any(a in _PRIMARY_FLAGS or a.startswith(_PRIMARY_FLAGS) for a in args):
        plan = Plan(allow_failures=any(a in ("allow_failures=true", "allow_failures=True")
                                       for a in args), output=output,
                    hydra_args=tuple(overrides), flags=flags)
    else:
        plan = _composed(overrides, args, command, output, flags)
    _given_once(args)  # after: a value no cell could take is named as if given once
    return plan


def _composed(overrides: list[str], args: list[str], command: list[str] | None,
              output: Path | None, flags: tuple[str, ...]) -> Plan:
    """The plan of the composed config: every cell's config composed once."""
    _default_recipe_with_command(args, command)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise UsageError(hydra_line(exc)) from None
    _named_keys(parsed)
    dirs = _search_dirs(args)
    with initialize_config_module("aorta_core.conf", version_base="1.3"):
        composer = Composer(parsed, [f"hydra.searchpath=[{','.join(dirs)}]"] if dirs else [])
        cfg = composer.base()
        axes = composer.axes(cfg)
    try:
        settings = core_settings(cfg)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    _collector_keys(cfg)
    _selected_somewhere(composer)
    _command_given(settings, args, command)
    for arguments in composer.benchmark:  # composed outside the core's Hydra
        line = refusal(arguments)
        if line is not None:
            raise UsageError(line)
    _measurable_here(composer, settings)
    swept = tuple(a.key for a in axes)
    _one_value_keys(cfg, swept)
    return Plan(allow_failures=settings.allow_failures, retry=settings.retry.value, output=output,
                order="cells" if cfg.get("agree") is not None else settings.order.value,
                trials=settings.trials, swept=swept, flags=flags,
                hydra_args=(*(composer.forced.get(a, a) for a in overrides),
                            *_swept_command_in_names(cfg, swept)))


def _one_value_keys(cfg: DictConfig, swept: tuple[str, ...]) -> None:
    """The sweep-level keys (Hydra's ``exclude_keys``: ``trials``, ``timeout``, ``order``, ...)
    do not name a cell, so two values of one would make two cells of one name and folder, where
    the second finds the first's trials and runs nothing: each takes one value. A swept
    ``command`` names its cells (:func:`_swept_command_in_names`)."""
    excluded = set(cfg.hydra.job.config.override_dirname.exclude_keys) - {"command"}
    for key in swept:
        if key in excluded:
            raise UsageError(f"{key}= is the whole sweep's (it does not name a cell, so its "
                             f"values would share one cell folder): give one value, not a list")


def _swept_command_in_names(cfg: DictConfig, swept: tuple[str, ...]) -> list[str]:
    """A ``command=[...]`` given for the whole sweep is left out of the cell names (the swept
    values name the cells: ``size=64``, not the argv); a swept command is what tells cells
    apart, so it names them again."""
    if "command" not in swept:
        return []
    keys = [k for k in cfg.hydra.job.config.override_dirname.exclude_keys if k != "command"]
    return [f"hydra.job.config.override_dirname.exclude_keys=[{','.join(keys)}]"]
