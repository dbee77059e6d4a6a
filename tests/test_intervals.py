"""The interval union's two forms (numpy columns and plain pairs) follow one rule, HTA's; the
diagnosis's intersection of two unions agrees with it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_core.api import covered, merge, merged, total_length, union_length

_TIME = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)
_SPANS = st.lists(st.tuples(_TIME, st.floats(min_value=0, max_value=1e4, width=64)), max_size=60)


@given(_SPANS)
def test_pairs_and_columns_merge_alike(spans: list[tuple[float, float]]) -> None:
    pairs = [(start, start + length) for start, length in spans]
    columns = merge(np.array([s for s, _ in pairs]), np.array([e for _, e in pairs]))
    assert merged(pairs) == list(zip(columns[0].tolist(), columns[1].tolist(), strict=True))
    assert total_length(merged(pairs)) == covered(columns)
    assert union_length([s for s, _ in pairs], [e for _, e in pairs]) == covered(columns)


def test_touching_and_nested_intervals_join() -> None:
    assert merged([(4.0, 5.0), (0.0, 2.0), (2.0, 3.0), (0.5, 1.0)]) == [(0.0, 3.0), (4.0, 5.0)]
    assert merged([]) == [] and total_length([]) == 0.0


@given(_SPANS, _SPANS)
def test_a_wait_counts_where_it_overlaps_the_exposed_communication(waits, exposed) -> None:
    """``aorta diagnose``'s parent finds a rank's waiting as the overlap of its wait and of the
    exposed communication its worker found: the two sets' lengths less their union's."""
    from aorta_core.reports.diagnose import _overlap

    x, y = (merge(np.array([s for s, _ in spans]), np.array([s + n for s, n in spans]))
            for spans in (waits, exposed))
    both = np.hstack((x, y))
    union = covered(merge(both[0], both[1]))
    assert _overlap(x, y) == pytest.approx(covered(x) + covered(y) - union, abs=1e-6)
    assert _overlap(x, y) == _overlap(y, x) and _overlap(x, x) == pytest.approx(covered(x))
