"""The workload argv survives OmegaConf unchanged, whatever it contains."""

from hypothesis import given
from hypothesis import strategies as st
from omegaconf import OmegaConf

from aorta_core.argv import escape_for_omegaconf, split_command


def test_split_at_the_first_double_dash_only():
    assert split_command(["a=1", "--", "x", "--", "y"]) == (["a=1"], ["x", "--", "y"])
    assert split_command(["a=1"]) == (["a=1"], None)
    assert split_command(["--"]) == ([], [])


_TRICKY = st.text(alphabet=st.sampled_from(list("${}\\:.ab ,=\"'é")))


@given(st.lists(_TRICKY | st.text(), max_size=6))
def test_escaped_arguments_read_back_byte_exact(args):
    cfg = OmegaConf.create({"command": [escape_for_omegaconf(a) for a in args]})
    assert OmegaConf.to_container(cfg, resolve=True)["command"] == args
