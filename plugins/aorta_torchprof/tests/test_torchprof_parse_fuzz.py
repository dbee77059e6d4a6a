"""The trace parser on fuzzed events and bytes: never raises, never the catch-all (hypothesis)."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

from aorta_torchprof.parse import parse_dir
from fuzz_helpers import check_metrics
from needs import need

hypothesis = need("hypothesis")
st = hypothesis.strategies

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "M", "s", "f", "i", 3]),
        "cat": st.sampled_from(
            ["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "user_annotation", None]
        ),
        "name": st.sampled_from(["ncclKernel_x", "gemm", "ProfilerStep#1", "aten::mm", ""]) | _json,
        "ts": st.floats(allow_nan=False, allow_infinity=False) | _json,
        "dur": st.floats(min_value=-5, max_value=1e6) | _json,
        "pid": st.integers() | st.text(max_size=4),
        "tid": st.integers() | st.text(max_size=4),
        "args": st.fixed_dictionaries({}, optional={"correlation": st.integers() | _json}) | _json,
    },
)


@hypothesis.settings(max_examples=150, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(
    events=st.lists(_event, max_size=12) | _json,
    drop=st.booleans(),
    gz=st.booleans(),
    dist=st.none() | _json,
)
def test_fuzzed_traces_never_raise(tmp_path: Path, events, drop: bool, gz: bool, dist) -> None:
    doc = {"traceEvents": events, "distributedInfo": dist}
    data = json.dumps(doc).encode()
    path = tmp_path / ("rank0.pt.trace.json.gz" if gz else "rank0.pt.trace.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = parse_dir(tmp_path, drop_last_profiler_step=drop)
    # Malformed input costs metrics through the intended paths, never the catch-all.
    assert not [w for w in caught if "cannot parse" in str(w.message)]
    check_metrics(metrics, "torchprof_")
    ratio = metrics.get("torchprof_overlap_ratio")
    assert ratio is None or 0.0 <= ratio <= 1.0 + 1e-9


@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(raw=st.binary(max_size=200))
def test_fuzzed_bytes_never_raise(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "rank0.json").write_bytes(raw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_metrics(parse_dir(tmp_path), "torchprof_")
    assert not [w for w in caught if "cannot parse" in str(w.message)]
