"""The rocprof collector's options, and the value checks Hydra's typing cannot do."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Optional

from aorta_core.api import OptionError, check_regex, check_text

#: ``trace`` value -> the rocprofv3 flag that turns that domain on (rocprofv3.py flag names).
TRACE_FLAGS: dict[str, str] = {
    "kernel": "--kernel-trace",
    "hip": "--hip-trace",
    "hip_runtime": "--hip-runtime-trace",
    "memory_copy": "--memory-copy-trace",
    "rccl": "--rccl-trace",
    "marker": "--marker-trace",
    "scratch": "--scratch-memory-trace",
}
#: ``-f/--output-format`` choices of rocprofv3 7.x; only ``csv`` is turned into metrics.
OUTPUT_FORMATS = ("csv", "json", "pftrace", "otf2", "rocpd")
#: ``-u/--summary-units`` choices.
SUMMARY_UNITS = ("sec", "msec", "usec", "nsec")
#: Extensions rocprofv3 accepts for ``-i`` (anything else is a fatal error in rocprofv3.py).
INPUT_SUFFIXES = (".txt", ".text", ".yaml", ".yml", ".json")

_COUNTER = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\[\]]*")


@dataclass
class RocprofOptions:
    """``collector.rocprof.*``: what rocprofv3 traces and writes."""

    trace: list[str] = field(default_factory=lambda: ["kernel"])
    output_format: str = "csv"
    stats: bool = True
    pmc: list[str] = field(default_factory=list)
    kernel_include_regex: Optional[str] = None  # noqa: UP045 (OmegaConf needs Optional)
    summary_units: Optional[str] = None  # noqa: UP045
    input_file: Optional[str] = None  # noqa: UP045


def _one_of(key: str, value: Any, valid: tuple[str, ...] | list[str]) -> None:
    if value not in valid:
        raise OptionError(
            f"collector.rocprof.{key}={value!r} is not valid; use one of {', '.join(valid)}"
        )


def validate(options: RocprofOptions) -> None:
    """Raise ``OptionError`` (one line naming key, value and the valid ones) on a bad value."""
    if not options.trace:
        raise OptionError(
            "collector.rocprof.trace is empty; name at least one domain of "
            + ", ".join(TRACE_FLAGS)
        )
    for domain in options.trace:
        _one_of("trace", domain, list(TRACE_FLAGS))
    _one_of("output_format", options.output_format, OUTPUT_FORMATS)
    for counter in options.pmc:
        if not isinstance(counter, str) or not _COUNTER.fullmatch(counter):
            raise OptionError(
                f"collector.rocprof.pmc has {counter!r}, not a counter name; give one counter "
                "per list item, e.g. collector.rocprof.pmc=[SQ_WAVES,GRBM_COUNT]"
            )
    check_regex("collector.rocprof.kernel_include_regex", options.kernel_include_regex)
    if options.summary_units is not None:
        _one_of("summary_units", options.summary_units, SUMMARY_UNITS)
    path = options.input_file
    check_text("collector.rocprof.input_file", path)
    if path is not None and PurePath(path).suffix not in INPUT_SUFFIXES:
        raise OptionError(
            f"collector.rocprof.input_file={path!r}: rocprofv3 -i reads only "
            f"{', '.join(INPUT_SUFFIXES)} files"
        )
