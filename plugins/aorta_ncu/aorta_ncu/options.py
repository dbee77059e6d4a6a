"""The ncu collector's options, and the value checks Hydra's typing cannot do."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from aorta_core.api import OptionError, check_regex, check_text

#: ``--set`` identifiers of the stock section sets (``ncu --list-sets`` of Nsight Compute
#: 2025.3.1); ncu itself only warns about an unknown set and then profiles nothing.
SETS = ("basic", "detailed", "full", "nvlink", "pmsampling", "roofline")
#: ``--replay-mode`` values of ``ncu --help``.
REPLAY_MODES = ("kernel", "application", "range", "app-range")
TARGET_PROCESSES = ("all", "application-only")
CLOCK_CONTROLS = ("base", "none")
CACHE_CONTROLS = ("all", "none")

_SECTION = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_METRIC = re.compile(r"[^\s,\0]+")
#: ncu reads launch counts as 64-bit numbers; past that it refuses its command line.
_MAX_COUNT = 2**63 - 1


@dataclass
class NcuOptions:
    """``collector.ncu.*``: what ncu collects, on which launches, and how it replays them."""

    #: A stock set (``basic``, ``detailed``, ``full``, ...) or a list of section identifiers.
    set: Any = "basic"
    metrics: list[str] = field(default_factory=list)
    kernel_regex: str | None = None
    launch_skip: int = 0
    launch_count: int | None = None
    replay_mode: str = "kernel"
    target_processes: str = "all"
    clock_control: str = "base"
    cache_control: str = "all"
    ncu_bin: str | None = None
    #: Refuse the trial up front when the NVIDIA driver or counter permission is missing.
    host_check: bool = True


def _one_of(key: str, value: Any, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise OptionError(
            f"collector.ncu.{key}={value!r} is not valid; use one of {', '.join(valid)}"
        )


def _check_set(value: Any) -> None:
    if isinstance(value, str):
        _one_of("set", value, SETS)
        return
    if not isinstance(value, list) or not value:
        raise OptionError(
            f"collector.ncu.set={value!r} is neither a set name ({', '.join(SETS)}) nor a "
            "non-empty list of sections, e.g. collector.ncu.set=[SpeedOfLight,Occupancy]"
        )
    for section in value:
        if not isinstance(section, str) or not _SECTION.fullmatch(section):
            raise OptionError(
                f"collector.ncu.set has {section!r}, not a section identifier; give one per "
                "list item as ncu --list-sections prints them, e.g. [SpeedOfLight,Occupancy]"
            )


def validate(options: NcuOptions) -> None:
    """Raise ``OptionError`` (one line naming key, value and the fix) on a bad value."""
    _check_set(options.set)
    for metric in options.metrics:
        if not isinstance(metric, str) or not _METRIC.fullmatch(metric):
            raise OptionError(
                f"collector.ncu.metrics has {metric!r}, not a metric name; give one metric per "
                "list item, e.g. collector.ncu.metrics=[dram__bytes_read.sum,lts__t_bytes.sum]"
            )
    check_regex("collector.ncu.kernel_regex", options.kernel_regex)
    check_text("collector.ncu.ncu_bin", options.ncu_bin)
    if options.launch_skip < 0:
        raise OptionError(
            f"collector.ncu.launch_skip={options.launch_skip} is negative; give 0 or more"
        )
    if options.launch_count is not None and options.launch_count < 1:
        raise OptionError(
            f"collector.ncu.launch_count={options.launch_count} profiles nothing; give 1 or more, "
            "or null for every launch"
        )
    for key in ("launch_skip", "launch_count"):
        if (getattr(options, key) or 0) > _MAX_COUNT:
            raise OptionError(f"collector.ncu.{key}={getattr(options, key)} is more than ncu "
                              f"reads ({_MAX_COUNT})")
    _one_of("replay_mode", options.replay_mode, REPLAY_MODES)
    _one_of("target_processes", options.target_processes, TARGET_PROCESSES)
    _one_of("clock_control", options.clock_control, CLOCK_CONTROLS)
    _one_of("cache_control", options.cache_control, CACHE_CONTROLS)
