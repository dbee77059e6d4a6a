"""Issue 23, fuzzed collector options: any value of any option of every installed collector
(wrong types, lists, mappings, null, huge or negative ints, nan/inf, empty text, NUL, unknown
keys) is refused before anything runs, in one line naming the collector and the option, or
honoured: ``wrap_argv`` then returns a launch a process can start from, or a setup error.

The property takes the path a cell takes (the options typed by the collector's schema as Hydra
composes them, then :func:`aorta_core.engine.cells.valid_options`, which runs the collector's
``check_options``; a cell then asks ``check_machine``, which a machine may refuse whatever the
values), in-process; one sweep through the CLI shows the refused cells' lines and the
matrix. No GPU is used; a collector's ``wrap_argv`` that needs its profiler answers with a setup
error where it is missing and with a launch where it is found, so the property holds on either.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_aorta
from needs import need
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aorta_core import Launch, SetupError
from aorta_core.api.contracts import launch_problem
from aorta_core.engine.cells import ConfigError, valid_options
from aorta_core.engine.plugins import load_registry

hypothesis = need("hypothesis")
st = hypothesis.strategies

REGISTRY = load_registry()
SHIPPED = [n for n in ("ncu", "proton", "rocprof", "torchprof") if n in REGISTRY.collectors]
FUZZ = hypothesis.settings(
    max_examples=int(os.environ.get("AORTA_FUZZ_EXAMPLES", 150)), deadline=None,
    derandomize=True, database=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])


def _vocabulary(name: str) -> list[str]:
    """The words a collector's options module accepts (its tuples and mappings of names), so
    that the fuzz reaches the checks behind a valid first word."""
    module = __import__(type(REGISTRY.collectors[name].info.options()).__module__,
                        fromlist=["_"])
    words = set()
    for value in vars(module).values():
        if isinstance(value, tuple | dict):
            words.update(w for w in value if isinstance(w, str))
    return sorted(words)


#: Text that has broken or nearly broken an option check: NUL, a lone surrogate, unbalanced
#: regex, digits that are not ASCII (``int('²')`` raises), counts past what a profiler reads.
_SEEDS = ["", "\x00", "a\x00b", "x" * 5000, "\ud800", "(", "[", ".txt", "a.yaml", "a:b=c:d", "-1",
          "periodic_flushing:format=x", "pcsampling:interval=0", "pcsampling:interval=\u0661",
          "pcsampling:interval=\u00b2", "pcsampling:interval=2147483648",
          "pcsampling:interval=9" + "9" * 30]
_TEXT = st.one_of(st.text(max_size=8), st.sampled_from(_SEEDS))
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([2**64, -(2**63) - 1,
                                                                             10**30]),
                    st.floats(), _TEXT)
_ANY = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=6)


def _like(default: object, words: list[str]):
    """Values of the option's own type (most get past the schema, reaching the checks), mixed
    with values of any type."""
    word = st.sampled_from(words) | _TEXT
    typed = {bool: st.booleans(), int: _INT, str: word, list: st.lists(word, max_size=3)}
    return st.one_of(typed.get(type(default), word | _INT), _ANY)


_INT = st.integers() | st.sampled_from([0, -1, 2**31, 2**63, 10**30])


@st.composite
def option_values(draw) -> tuple[str, dict]:
    """A collector and values for a few of its options (or a key it does not have)."""
    name = draw(st.sampled_from(SHIPPED))
    defaults = dataclasses.asdict(REGISTRY.collectors[name].info.options())
    words = _vocabulary(name)
    keys = draw(st.lists(st.sampled_from([*defaults, "typo"]), min_size=1, max_size=3,
                         unique=True))
    return name, {k: draw(_like(defaults.get(k), words)) for k in keys}


def _one_line_naming(text: str, name: str) -> None:
    """The collector's own words (``OptionError``), not its check crashing on the value."""
    assert len(text.splitlines()) == 1 and f"collector.{name}" in text, text
    assert "check_options failed" not in text, text


@pytest.mark.skipif(not SHIPPED, reason="no shipped collector is installed")
@FUZZ
@hypothesis.given(chosen=option_values())
def test_any_option_value_is_refused_in_one_line_or_honoured(tmp_path: Path, chosen) -> None:
    name, values = chosen
    try:  # what Hydra's compose does with the schema: wrong types, null, nan for an int, typo
        node = OmegaConf.merge(OmegaConf.structured(REGISTRY.collectors[name].info.options),
                               values)
    except OmegaConfBaseException:
        hypothesis.event(f"{name}: refused at compose")
        return  # refused at compose, in one line (tests/test_override_fuzz.py)
    try:
        options = valid_options(OmegaConf.create({"collector": {name: node}}), REGISTRY, 60)
    except ConfigError as exc:
        _one_line_naming(str(exc), name)
        hypothesis.event(f"{name}: refused by check_options")
        return
    texts = json.dumps(dataclasses.asdict(options[name]), default=str)
    assert "\\u0000" not in texts, values  # no process could carry it: refused by the check
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    launch = Launch(("python3", str(script)), dict(os.environ), tmp_path)
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    try:
        wrapped = REGISTRY.call(name, "wrap_argv", launch=launch, options=options[name],
                                artifact_dir=folder)
    except SetupError as exc:
        assert len(str(exc).splitlines()) == 1, str(exc)
        hypothesis.event(f"{name}: setup error")
        return
    hypothesis.event(f"{name}: launch")
    assert isinstance(wrapped, Launch) and launch_problem(wrapped) is None, (values, wrapped)


#: Values the checks let through before the fuzz (a crash of the check, or a launch that fails
#: after the payload's profiler started) -> the one line that now refuses them.
MISSED = [
    ("proton", {"backend": "cupti", "backend_mode": "pcsampling:interval=\u00b2"},
     "collector.proton.backend_mode: interval='\u00b2' must be a positive integer"),
    ("proton", {"backend": "cupti", "backend_mode": "pcsampling:interval=2147483648"},
     "collector.proton.backend_mode: interval=2147483648 is more than Proton reads (2147483647)"),
    ("ncu", {"launch_skip": 2**64}, f"collector.ncu.launch_skip={2**64} is more than ncu reads "
                                    f"({2**63 - 1})"),
    ("ncu", {"ncu_bin": "a\x00"}, "collector.ncu.ncu_bin='a\\x00' contains a NUL byte; remove it"),
    ("ncu", {"metrics": ["a\x00"]}, "collector.ncu.metrics has 'a\\x00', not a metric name"),
    ("ncu", {"kernel_regex": "a\x00"},
     "collector.ncu.kernel_regex='a\\x00' contains a NUL byte; remove it"),
    ("rocprof", {"input_file": "a\x00.txt"},
     "collector.rocprof.input_file='a\\x00.txt' contains a NUL byte; remove it"),
]


@pytest.mark.parametrize(("name", "values", "line"), MISSED, ids=[str(m[1]) for m in MISSED])
def test_values_the_checks_missed_are_refused(name: str, values: dict, line: str) -> None:
    if name not in SHIPPED:
        pytest.skip(f"needs aorta-{name}: pip install -e plugins/aorta_{name}")
    node = OmegaConf.merge(OmegaConf.structured(REGISTRY.collectors[name].info.options), values)
    with pytest.raises(ConfigError) as refused:
        valid_options(OmegaConf.create({"collector": {name: node}}), REGISTRY, 60)
    assert str(refused.value).startswith(line)  # the key once: the message starts with it


def test_hostile_options_cost_their_cells_only(tmp_path: Path) -> None:
    """Through the CLI: values the collector refuses are their cells' one-line errors naming the
    option (exit status 1); the values it accepts run, a wait of 10**20 steps too (the profiler
    never records: a warning); the matrix is written."""
    if "torchprof" not in SHIPPED:
        pytest.skip("needs aorta-torchprof: pip install -e plugins/aorta_torchprof")
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=torchprof",
                      "collector.torchprof.wait=1,-1,99999999999999999999",
                      "collector.torchprof.mode=env,'a\\x00b'", f"output={out}", "--", "true"],
                     cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("aorta: error:")]
    assert "Traceback" not in done.stderr and len(errors) == 4, done.stderr
    assert all(": collector.torchprof." in line and "collector.torchprof: collector.torchprof"
               not in line for line in errors), errors
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    assert sorted(c["axes"]["collector.torchprof.wait"] for c in cells if c["trials"]["pass"]) \
        == ["1", "99999999999999999999"]
    assert len(cells) == 6
