"""Numbers a metric may carry: what JSON readers (orjson, polars, browsers) take without loss or
error. Artifacts are untrusted, so a count can arrive as ``1e300`` or ``2**70``; orjson refuses
ints beyond 64 bits and the JSON format has no NaN or infinity.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def json_number(value: object) -> int | float | None:
    """``value`` as a JSON-safe number, or ``None`` when it cannot be one (omit the metric).

    An int within signed 64 bits stays an int; a larger one becomes a float when finite. A
    float (numpy scalars included) must be finite. A bool is returned unchanged: JSON has
    ``true``/``false``, so it is a valid metric, but callers counting things should reject it
    themselves. Anything that is not a number gives ``None``.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, Integral):
        value = int(value)
        if INT64_MIN <= value <= INT64_MAX:
            return value
        try:
            value = float(value)
        except OverflowError:  # beyond ~1.8e308
            return None
    elif isinstance(value, Real):
        value = float(value)
    else:
        return None
    return value if math.isfinite(value) else None
