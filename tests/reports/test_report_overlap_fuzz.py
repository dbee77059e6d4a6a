"""Any JSON object in a rank file becomes a report row without raising (hypothesis)."""

from __future__ import annotations

import orjson
from needs import need

from aorta_core.reports.overlap_report import _row

hypothesis = need("hypothesis")
st = hypothesis.strategies

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["profile", "overlap", "overlap_ms", "per_stream_ms", "compute",
                         "compute_comm", "loss", "global_step", "x"]), inner, max_size=4),
    max_leaves=20)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.dictionaries(
    st.sampled_from(["profile", "loss", "global_step", "epoch", "rank"]), json_values, max_size=5))
def test_any_json_object_becomes_a_row(payload):
    row = _row(orjson.loads(orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
                            if _finite(payload) else b"{}"))
    assert row["has_overlap"] in (True, False)
    for key in ("overlap_ms", "compute_ms"):
        assert row[key] is None or isinstance(row[key], float)


def _finite(value) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True
