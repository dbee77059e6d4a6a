"""json_number: what a metric may carry (docs/plugins.md "Reading artifacts")."""

from fractions import Fraction

import numpy as np
import orjson
import pytest

from aorta_core import json_number


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7),
        (2**63 - 1, 2**63 - 1),
        (-(2**63), -(2**63)),
        (2**63, float(2**63)),  # one past int64: a float, as orjson would refuse the int
        (-(2**70), -float(2**70)),
        (1e300, 1e300),
        (0.5, 0.5),
        (np.int64(5), 5),
        (np.float32(1.5), 1.5),
        (Fraction(1, 4), 0.25),
        (True, True),
        (False, False),
    ],
)
def test_numbers_json_can_carry(value, expected):
    number = json_number(value)
    assert number == expected and type(number) is type(expected)
    orjson.dumps(number)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -float("inf"), 10**400, -(10**400), None, "3", [1], {}]
)
def test_what_no_metric_can_carry(value):
    assert json_number(value) is None
