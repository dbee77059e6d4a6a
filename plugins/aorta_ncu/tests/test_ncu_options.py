"""Option checks, as the core calls them through ``check_options`` (refused combinations:
tests/test_resource_claims.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from aorta_ncu import plugin
from aorta_ncu.options import (
    CACHE_CONTROLS,
    CLOCK_CONTROLS,
    REPLAY_MODES,
    SETS,
    TARGET_PROCESSES,
    NcuOptions,
)

from aorta_core import OptionError


def check(opts: NcuOptions, *others: str) -> None:
    plugin.check_options(options=opts, selected={"ncu": opts, **dict.fromkeys(others, object())})


def test_defaults_are_valid_and_the_collector_says_its_times_are_not_comparable():
    check(NcuOptions())
    info = plugin.aorta_collector()
    assert info.wrap_order == 5 and info.times_comparable is False
    assert info.options is NcuOptions


@pytest.mark.parametrize(("key", "values"), [
    ("set", SETS), ("replay_mode", REPLAY_MODES), ("target_processes", TARGET_PROCESSES),
    ("clock_control", CLOCK_CONTROLS), ("cache_control", CACHE_CONTROLS),
])
def test_every_listed_value_is_accepted(key, values):
    for value in values:
        check(replace(NcuOptions(), **{key: value}))


def test_sections_extra_metrics_filters_and_an_outside_collector_are_accepted():
    check(NcuOptions(set=["SpeedOfLight", "MemoryWorkloadAnalysis_Chart"],
                     metrics=["dram__bytes_read.sum", "regex:^lts__t_sectors"],
                     kernel_regex="gemm|softmax", launch_skip=3, launch_count=1), "rusage")


@pytest.mark.parametrize(("change", "message"), [
    ({"set": "nope"}, "collector.ncu.set='nope' is not valid; use one of basic, detailed, full, "
     "nvlink, pmsampling, roofline"),
    ({"set": []}, "collector.ncu.set=[] is neither a set name (basic, detailed, full, nvlink, "
     "pmsampling, roofline) nor a "
     "non-empty list of sections, e.g. collector.ncu.set=[SpeedOfLight,Occupancy]"),
    ({"set": ["SpeedOfLight", "Speed Of Light"]}, "collector.ncu.set has 'Speed Of Light', not a "
     "section identifier; give one per list item as ncu --list-sections prints them, e.g. "
     "[SpeedOfLight,Occupancy]"),
    ({"metrics": ["a.sum,b.sum"]}, "collector.ncu.metrics has 'a.sum,b.sum', not a metric name; "
     "give one metric per list item, e.g. "
     "collector.ncu.metrics=[dram__bytes_read.sum,lts__t_bytes.sum]"),
    ({"kernel_regex": " "}, "collector.ncu.kernel_regex is blank; give a regular expression or "
     "null"),
    ({"kernel_regex": "gemm("}, "collector.ncu.kernel_regex='gemm(' does not compile (missing ), "
     "unterminated subpattern at position 4); fix the regular expression"),
    ({"launch_skip": -1}, "collector.ncu.launch_skip=-1 is negative; give 0 or more"),
    ({"launch_count": 0}, "collector.ncu.launch_count=0 profiles nothing; give 1 or more, or null "
     "for every launch"),
    ({"replay_mode": "fast"}, "collector.ncu.replay_mode='fast' is not valid; use one of kernel, "
     "application, range, app-range"),
    ({"target_processes": "application"}, "collector.ncu.target_processes='application' is not "
     "valid; use one of all, application-only"),
    ({"clock_control": "boost"}, "collector.ncu.clock_control='boost' is not valid; use one of "
     "base, none"),
    ({"cache_control": "flush"}, "collector.ncu.cache_control='flush' is not valid; use one of "
     "all, none"),
])
def test_bad_values_are_one_line_naming_key_and_fix(change, message):
    with pytest.raises(OptionError) as info:
        check(replace(NcuOptions(), **change))
    assert str(info.value) == message

