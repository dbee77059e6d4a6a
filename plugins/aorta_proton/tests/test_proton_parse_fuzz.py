"""``parse_metrics`` on fuzzed JSON and truncated real captures never raises (hypothesis)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

from aorta_proton import plugin
from aorta_proton.options import ProtonOptions
from fuzz_helpers import check_metrics
from needs import need

hypothesis = need("hypothesis")
st = hypothesis.strategies
FIXTURES = Path(__file__).parent / "fixtures"


def parse(folder: Path) -> dict:
    return plugin.parse_metrics(artifact_dir=folder, options=ProtonOptions())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "frame",
                    "name",
                    "metrics",
                    "children",
                    "time (ns)",
                    "count",
                    "cycles",
                    "traceEvents",
                    "ph",
                    "cat",
                    "dur",
                    "num_samples",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@hypothesis.settings(max_examples=150, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(data=json_values, suffix=st.sampled_from([".hatchet", ".chrome_trace"]))
def test_fuzzed_json_never_raises(tmp_path, data, suffix):
    out = tmp_path / "fuzz"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    (out / f"p{suffix}").write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metrics = parse(out)
    check_metrics(metrics, "proton_")


@hypothesis.settings(max_examples=100, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(cut=st.integers(min_value=0, max_value=1199), junk=st.binary(max_size=16))
def test_truncated_real_capture_never_raises(tmp_path, cut, junk):
    out = tmp_path / "cut"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    raw = (FIXTURES / "roctracer_add_mi300.hatchet").read_bytes()
    (out / "p.hatchet").write_bytes(raw[:cut] + junk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_metrics(parse(out), "proton_")
