"""Splitting aorta's own arguments from the workload argv (the fuzzing: test_argv_fuzz.py)."""

from aorta_core.argv import split_command


def test_split_at_the_first_double_dash_only():
    assert split_command(["a=1", "--", "x", "--", "y"]) == (["a=1"], ["x", "--", "y"])
    assert split_command(["a=1"]) == (["a=1"], None)
    assert split_command(["--"]) == ([], [])
