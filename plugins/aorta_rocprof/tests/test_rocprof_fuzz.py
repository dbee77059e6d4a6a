"""Hypothesis: malformed CSVs in every file the parser reads never raise out of parse_metrics."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

from aorta_rocprof import plugin
from needs import need

hypothesis = need("hypothesis")
st = hypothesis.strategies

HEADERS = {
    "aorta_kernel_stats.csv": '"Name","Calls","TotalDurationNs","AverageNs"',
    "aorta_kernel_trace.csv": '"Kind","Kernel_Name","Start_Timestamp","End_Timestamp"',
    "results.csv": '"Index","KernelName","BeginNs","EndNs"',
    "aorta_memory_copy_trace.csv": '"Kind","Direction","Start_Timestamp","End_Timestamp","Size"',
    "aorta_rccl_api_trace.csv": '"Domain","Function","Start_Timestamp","End_Timestamp"',
}
cell = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(['"KERNEL_DISPATCH"', '"k(int, float)"', '""', '"a""b"', "", '"unterminated']),
    st.text(max_size=12),
)
row = st.lists(cell, min_size=0, max_size=6).map(",".join)


@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(
    name=st.sampled_from(sorted(HEADERS)),
    keep_header=st.booleans(),
    rows=st.lists(row, max_size=8),
    tail=st.binary(max_size=16),
)
def test_malformed_csv_never_raises(name, keep_header, rows, tail):
    with tempfile.TemporaryDirectory() as tmp:
        lines = ([HEADERS[name]] if keep_header else []) + rows
        Path(tmp, name).write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + tail)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            metrics = plugin.parse_metrics(artifact_dir=Path(tmp), options=None)
    assert isinstance(metrics, dict)
    for key, value in metrics.items():
        assert key.startswith("rocprof_")
        if isinstance(value, float):
            assert value == value and value not in (float("inf"), float("-inf"))
