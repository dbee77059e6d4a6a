"""Option checks, as the core calls them through ``check_options`` (the Proton conflict:
tests/test_resource_claims.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from aorta_rocprof import plugin
from aorta_rocprof.options import OUTPUT_FORMATS, SUMMARY_UNITS, TRACE_FLAGS, RocprofOptions

from aorta_core import OptionError


def check(opts: RocprofOptions, **others) -> None:
    plugin.check_options(options=opts, selected={"rocprof": opts, **others})


def test_defaults_are_valid_and_documented():
    opts = RocprofOptions()
    check(opts)
    assert (opts.trace, opts.output_format, opts.stats, opts.pmc) == (["kernel"], "csv", True, [])
    assert plugin.aorta_collector().wrap_order == 10


@pytest.mark.parametrize("domain", list(TRACE_FLAGS))
def test_each_trace_domain_accepted(domain):
    check(RocprofOptions(trace=[domain]))


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
def test_each_output_format_accepted(fmt):
    check(RocprofOptions(output_format=fmt))


@pytest.mark.parametrize("unit", SUMMARY_UNITS)
def test_each_summary_unit_accepted(unit):
    check(RocprofOptions(summary_units=unit))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"trace": []}, "collector.rocprof.trace is empty"),
        ({"trace": ["kernel", "hsa"]}, "collector.rocprof.trace='hsa' is not valid"),
        ({"output_format": "sqlite"}, "collector.rocprof.output_format='sqlite'"),
        ({"summary_units": "ms"}, "collector.rocprof.summary_units='ms'"),
        ({"pmc": ["SQ_WAVES GRBM_COUNT"]}, "collector.rocprof.pmc has 'SQ_WAVES GRBM_COUNT'"),
        ({"pmc": [""]}, "collector.rocprof.pmc has ''"),
        ({"kernel_include_regex": "  "}, "kernel_include_regex is blank"),
        ({"kernel_include_regex": "gemm("}, "kernel_include_regex='gemm(' does not compile"),
        ({"input_file": "counters.csv"}, "input_file='counters.csv': rocprofv3 -i reads only"),
    ],
)
def test_bad_values_name_key_and_fix(change, fragment):
    with pytest.raises(OptionError) as info:
        check(replace(RocprofOptions(), **change))
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_valid_values_listed_in_message():
    with pytest.raises(OptionError) as info:
        check(RocprofOptions(output_format="sqlite"))
    assert "csv, json, pftrace, otf2, rocpd" in str(info.value)
