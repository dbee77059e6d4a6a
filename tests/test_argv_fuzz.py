"""The workload argv survives OmegaConf unchanged, whatever it contains; a launch a plugin's
``wrap_argv`` returns, whatever its shape, is started or named in one line (hypothesis)."""

import contextlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from needs import need
from omegaconf import OmegaConf

from aorta_core.api.contracts import Launch, launch_problem
from aorta_core.engine.argv import escape_for_omegaconf

hypothesis = need("hypothesis")
st = hypothesis.strategies

_TRICKY = st.text(alphabet=st.sampled_from(list("${}\\:.ab ,=\"'é")))


@hypothesis.given(st.lists(_TRICKY | st.text(), max_size=6))
def test_escaped_arguments_read_back_byte_exact(args):
    cfg = OmegaConf.create({"command": [escape_for_omegaconf(a) for a in args]})
    assert OmegaConf.to_container(cfg, resolve=True)["command"] == args


class _BadPath(os.PathLike):
    """A path whose ``__fspath__`` raises, or returns what no path is."""

    def __init__(self, result: object) -> None:
        self.result = result

    def __fspath__(self):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


class _BadEnv(Mapping):
    """A mapping that fails when it is read."""

    def __getitem__(self, key):
        raise KeyError(key)

    def __iter__(self):
        raise RuntimeError("unreadable")

    def __len__(self) -> int:
        return 1


_ANY = st.one_of(st.text(max_size=8), st.binary(max_size=8), st.none(), st.integers(),
                 st.floats(), st.sampled_from(["", "\x00", "a=b", "\ud800", "x" * 5000]),
                 st.builds(Path, st.text(max_size=8)),
                 st.sampled_from([_BadPath(RuntimeError()), _BadPath(3), _BadPath(b"/tmp")]))
_ARGV = st.one_of(
    st.lists(_ANY | st.just("x"), max_size=4).map(lambda rest: ("true", *rest)),
    st.lists(_ANY, max_size=3).map(tuple), _ANY,
    st.integers(0, 200_000).map(lambda n: ("true", *["x" * 64] * n)))  # up to ~13 MB: E2BIG
_ENV = st.one_of(st.dictionaries(_ANY | st.text(max_size=4), _ANY | st.text(max_size=4),
                                 max_size=3).map(lambda e: {"PATH": os.environ["PATH"], **e}),
                 st.just(_BadEnv()), _ANY)
_CWD = st.one_of(st.sampled_from([".", "/", "/nonexistent/x", "/dev/null"]), _ANY)


@hypothesis.settings(max_examples=int(os.environ.get("AORTA_FUZZ_EXAMPLES", 200)),
                     deadline=None, derandomize=True, database=None)
@hypothesis.given(argv=_ARGV, env=_ENV, cwd=_CWD)
def test_a_launch_of_any_shape_is_started_or_named(argv, env, cwd) -> None:
    """What ``wrap_argv`` returns (items of any type, bytes, paths, hostile objects, huge lists,
    environments and folders of any type) is named by ``launch_problem`` without raising, or a
    process starts from it, or the start fails with the ``OSError`` a trial records as "cannot
    start": never the ``TypeError``/``ValueError`` that would end the sweep."""
    problem = launch_problem(Launch(argv, env, cwd))
    if problem is not None:
        assert isinstance(problem, str) and len(problem.splitlines()) == 1, problem
        return
    with contextlib.suppress(OSError):  # "cannot start ...": the trial's error, the sweep goes on
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, timeout=30)
