"""The workload argv survives OmegaConf unchanged, whatever it contains (hypothesis)."""

from needs import need
from omegaconf import OmegaConf

from aorta_core.argv import escape_for_omegaconf

hypothesis = need("hypothesis")
st = hypothesis.strategies

_TRICKY = st.text(alphabet=st.sampled_from(list("${}\\:.ab ,=\"'é")))


@hypothesis.given(st.lists(_TRICKY | st.text(), max_size=6))
def test_escaped_arguments_read_back_byte_exact(args):
    cfg = OmegaConf.create({"command": [escape_for_omegaconf(a) for a in args]})
    assert OmegaConf.to_container(cfg, resolve=True)["command"] == args
