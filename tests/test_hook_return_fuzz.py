"""Issue 40, fuzzed hook return values: whatever a collector's hook returns — any type, nested
any way, a plugin's subclass of ``str``/``int``/``float``/``list``/``dict`` whose methods raise,
an object whose every dunder method raises or whose pickling runs code, the contract's types
holding any of those — costs that collector one line (a setup error, a refused cell, a warning)
and never escapes the hook's isolation: the trial gets its record, the report its sections, the
timeline its other lanes, and what comes back into aorta's process is plain (``str``, ``int``,
``float``, ``bool``, ``None``, lists, dicts, paths, aorta's own dataclasses).

Each hook's answer goes the way a sweep, ``aorta timeline``, ``aorta report`` and the ``aorta``
command line take it, in-process (a subprocess per example would take minutes), with a real
plugin: a distribution installed on ``sys.path`` and loaded by the registry, whose hooks return
what the test puts in its ``ANSWERS``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import PluginSite
from fuzz_helpers import FUZZ, check_metrics, time_limit
from needs import need
from omegaconf import OmegaConf

from aorta_core.api.contracts import (
    KERNEL_KINDS,
    Claim,
    Command,
    KernelRow,
    Launch,
    ReportSection,
    TimelineSource,
)
from aorta_core.app.cli import RESERVED
from aorta_core.app.plugin_commands import collector_commands
from aorta_core.engine.cells import Cell, ConfigError, checked_collectors
from aorta_core.engine.collector_sections import collector_sections
from aorta_core.engine.plugins import load_registry
from aorta_core.engine.records import load_record
from aorta_core.engine.trial import run_trial
from aorta_core.reports.timeline_inputs import discover

hypothesis = need("hypothesis")
st = hypothesis.strategies

HOSTILE = '''
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

#: hook -> what it returns (set by the test; the hook's process is forked from it)
ANSWERS = {}

@dataclass
class Options:
    level: int = 1

def _answer(hook, default):
    return ANSWERS[hook] if hook in ANSWERS else default

@hookimpl
def aorta_collector():
    return CollectorInfo(description="answers anything", options=Options)

@hookimpl
def aorta_commands():
    return _answer("aorta_commands", {})

@hookimpl
def check_options(options, selected):
    return _answer("check_options", None)

@hookimpl
def resource_claims(options):
    return _answer("resource_claims", [])

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return _answer("wrap_argv", launch)

@hookimpl
def collect_artifacts(artifact_dir, options, run):
    return _answer("collect_artifacts", None)

@hookimpl
def kernel_table(artifact_dir, options):
    return _answer("kernel_table", [])

@hookimpl
def parse_metrics(artifact_dir, options):
    return _answer("parse_metrics", {})

@hookimpl
def timeline_sources(artifact_dir, options):
    return _answer("timeline_sources", [])

@hookimpl
def report_sections(matrix, output_dir):
    return _answer("report_sections", [])
'''


def _raise(*args, **kwargs):
    raise RuntimeError("hostile")


_DUNDERS = ("__str__", "__repr__", "__bool__", "__iter__", "__len__", "__fspath__", "__index__",
            "__int__", "__float__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__",
            "__reduce__", "__reduce_ex__", "__getitem__", "__contains__")


class Hostile:
    """Every way of reading it raises: text, truth, comparison, iteration, path, number,
    pickling."""

    __hash__ = object.__hash__


for _name in _DUNDERS:
    setattr(Hostile, _name, _raise)


def _hostile_subclass(base: type, *names: str) -> type:
    """``base`` whose methods ``names`` raise (hashable, so that it can be a key)."""
    return type(f"Hostile{base.__name__.title()}", (base,),
                {**dict.fromkeys(names, _raise), "__hash__": base.__hash__})


HostileStr = _hostile_subclass(str, "__str__", "__repr__", "__eq__", "startswith", "encode",
                               "__len__", "__iter__", "__getitem__", "split", "__format__")
HostileInt = _hostile_subclass(int, "__str__", "__repr__", "__eq__", "__lt__", "__le__",
                               "__gt__", "__ge__", "__int__", "__index__", "__float__")
HostileFloat = _hostile_subclass(float, "__str__", "__repr__", "__eq__", "__lt__", "__le__",
                                 "__gt__", "__ge__", "__float__", "__int__")
HostileList = _hostile_subclass(list, "__iter__", "__len__", "__getitem__", "__repr__")
HostileDict = _hostile_subclass(dict, "items", "keys", "values", "__iter__", "__getitem__",
                                "__len__", "__repr__", "get")


class Unshowable:
    def __str__(self):
        raise RuntimeError("hostile")

    __repr__ = __str__


KeyStr = _hostile_subclass(str, "__str__", "__repr__", "startswith", "encode", "__format__")
KeyInt = _hostile_subclass(int, "__str__", "__repr__", "__int__", "__index__", "__lt__", "__le__")


class Exits:
    """Pickling it hands aorta ``os._exit(3)`` to call: never built on aorta's side."""

    def __reduce__(self):
        return os._exit, (3,)


class PathOf(os.PathLike):
    """A path whose ``__fspath__`` returns anything (bytes, an int, a hostile str)."""

    def __init__(self, result: object) -> None:
        self.result = result

    def __fspath__(self):
        return self.result


def _deep(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


#: Each makes a value that is none of the plain types (made when drawn: the strategy's own
#: text would read them).
_ODD = st.sampled_from([
    Hostile, Exits, object, lambda: lambda: 1, lambda: HostileStr("hostile_x"),
    lambda: HostileInt(5), lambda: HostileFloat(1.5), lambda: HostileList(["a"]),
    lambda: HostileDict(hostile_x=1), lambda: PathOf(b"/tmp"), lambda: PathOf(3),
    lambda: PathOf(HostileStr("x")), lambda: _deep(10_000), lambda: {1, 2}, lambda: b"\xff",
    lambda: 1j, lambda: type, lambda: ...]).map(lambda make: make())
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.just(2**64), st.floats(),
                    st.text(max_size=8), st.just("\ud800"), st.just("hostile_x"),
                    st.builds(Path, st.text(max_size=8)), _ODD)
#: Keys raise when read as text or numbers (a key that cannot even be compared cannot be in
#: a dict).
_KEY = st.one_of(st.text(max_size=8), st.just("hostile_n"), st.integers(),
                 st.sampled_from([Unshowable, lambda: KeyStr("hostile_k"),
                                  lambda: KeyInt(1)]).map(lambda make: make()))


def _contract(inner):
    """The contract's own types, holding anything."""
    return st.one_of(
        st.builds(Launch, argv=inner | st.lists(inner, max_size=3).map(tuple), env=inner,
                  cwd=inner),
        st.builds(Claim, resource=inner, exclusive=inner, why=inner),
        st.builds(KernelRow, name=inner, calls=inner, total_ms=inner,
                  kind=st.sampled_from(KERNEL_KINDS) | inner, step=inner),
        st.builds(Command, help=inner, main=inner),
        st.builds(ReportSection, title=inner, text=inner, columns=inner,
                  rows=st.lists(st.lists(inner, max_size=2), max_size=2)),
        st.builds(TimelineSource, path=inner, clock=st.sampled_from(["unix", "relative"]) | inner,
                  rank=inner, span=st.sampled_from(["run", "iterations"]) | inner,
                  error_bound_ms=inner, thread_name=inner))


ANY = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_KEY, inner, max_size=3), _contract(inner)), max_leaves=8)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The hostile collector, installed and loaded alone (the registry is loaded again after)."""
    site = PluginSite(tmp_path_factory.mktemp("site"))
    site.add("hostile", HOSTILE)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.syspath_prepend(str(site.root))
            patch.setenv("AORTA_LOAD_PLUGINS", "hostile")
            load_registry.cache_clear()
            registry = load_registry()
            assert "hostile" in registry.collectors, registry.statuses
            yield registry, sys.modules["aorta_test_hostile.plugin"]
    finally:  # the other tests' registry, whatever happened here
        load_registry.cache_clear()


def _one_line(text: object) -> None:
    assert type(text) is str and len(text.splitlines()) <= 1, text


def _plain(value: object) -> None:
    """Built of the types a hook's answer may bring into aorta's process."""
    if isinstance(value, list | tuple):
        for item in value:
            _plain(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _plain(key)
            _plain(item)
    elif dataclasses.is_dataclass(value):
        assert type(value).__module__.startswith("aorta_core."), type(value)
        for item in dataclasses.asdict(value).values():
            _plain(item)
    else:
        assert type(value) in (str, int, float, bool, type(None)) or isinstance(value, Path), \
            type(value)


def _trial(registry, folder: Path) -> None:
    """A trial's hooks (``wrap_argv``, ``collect_artifacts``, ``parse_metrics``,
    ``kernel_table``): a record, and a kernel table that polars reads when it names one."""
    cell = Cell(name="c", directory=folder / "c", axes={}, command=("true",), env={},
                collectors={"hostile": registry.collectors["hostile"].info.options()},
                timeout_s=60, retain={}, fingerprint="f", hook_timeout_s=20)
    run_trial(cell, 0, registry)
    record = load_record(cell.trial_dir(0) / "record.json")
    assert record.verdict in ("pass", "error")
    if record.error is not None:
        _one_line(record.error)
    check_metrics({k: v for k, v in record.metrics.items() if k != "hostile_artifact_dir"},
                  "hostile_")
    for note in record.warnings.get("hostile", []):
        _one_line(note)
    assert all(type(a) is str for a in record.collectors["hostile"].artifacts)
    if record.kernels is not None:
        table = pl.read_parquet(cell.trial_dir(0) / record.kernels.file)
        assert table.height == record.kernels.rows > 0


def _checks(registry, folder: Path) -> None:
    """``check_options`` and ``resource_claims``: the cell runs or is refused in one line."""
    options = OmegaConf.structured(registry.collectors["hostile"].info.options)
    try:
        checked = checked_collectors(OmegaConf.create({"collector": {"hostile": options}}),
                                     registry, 20)
    except ConfigError as exc:
        _one_line(str(exc))
        return
    assert list(checked) == ["hostile"]


def _commands(registry, folder: Path) -> None:
    for name, found in collector_commands(registry, RESERVED).items():
        assert type(name) is str and isinstance(found.command, Command)
        assert callable(found.command.main)


def _timeline(registry, folder: Path) -> None:
    (folder / "hostile").mkdir()
    warned: list[str] = []
    discover(folder, {"collectors": {"hostile": {"options": {}}}}, warned.append, 20)
    for line in warned:
        _one_line(line)


def _report(registry, folder: Path) -> None:
    for section in collector_sections({"cells": [{"collectors": ["hostile"]}]}, folder):
        _plain(section)


#: Each hook, and the way its answer takes through aorta.
HOOKS = {"wrap_argv": _trial, "collect_artifacts": _trial, "parse_metrics": _trial,
         "kernel_table": _trial,
         "check_options": _checks, "resource_claims": _checks, "aorta_commands": _commands,
         "timeline_sources": _timeline, "report_sections": _report}


@pytest.mark.parametrize("hook", HOOKS)
@FUZZ
@hypothesis.given(value=ANY)
def test_any_answer_of_a_hook_costs_one_line_never_its_isolation(plugin, hook: str, value):
    registry, module = plugin
    module.ANSWERS.clear()
    module.ANSWERS[hook] = value
    with tempfile.TemporaryDirectory() as tmp, time_limit(120):
        HOOKS[hook](registry, Path(tmp))


def test_the_fuzz_reaches_the_hooks(plugin) -> None:
    """The plugin's answers do reach aorta: a plain launch is run, plain metrics recorded."""
    registry, module = plugin
    module.ANSWERS.clear()
    module.ANSWERS["parse_metrics"] = {"hostile_n": HostileInt(7), "hostile_s": HostileStr("x")}
    with tempfile.TemporaryDirectory() as tmp:
        _trial(registry, Path(tmp))
        record = load_record(Path(tmp) / "c" / "trial_000" / "record.json")
    assert (record.metrics["hostile_n"], record.metrics["hostile_s"]) == (7, "x")


def test_kernel_rows_reach_the_table_and_a_bad_row_costs_only_the_table(plugin) -> None:
    registry, module = plugin
    module.ANSWERS.clear()
    mangled = "_ZN2at6native18elementwise_kernelILi128ELi4EEEviT_"
    module.ANSWERS["parse_metrics"] = {"hostile_n": 1}
    module.ANSWERS["kernel_table"] = [KernelRow(mangled, 3, 1.5, "gpu_kernel", 2),
                                      KernelRow("aten::mm", 1, 0.25, "cpu_op")]
    with tempfile.TemporaryDirectory() as tmp:
        _trial(registry, Path(tmp))
        trial = Path(tmp) / "c" / "trial_000"
        record = load_record(trial / "record.json")
        table = pl.read_parquet(trial / "kernels.parquet")
    assert record.kernels.file == "kernels.parquet" and record.kernels.rows == 2
    assert table.rows() == [
        ("hostile", "void at::native::elementwise_kernel<128, 4>(int, 128)",
         "at::native::elementwise_kernel<128,4>", "gpu_kernel", 2, 3, 1.5),
        ("hostile", "aten::mm", "aten::mm", "cpu_op", None, 1, 0.25)]
    module.ANSWERS["kernel_table"] = [KernelRow("k", 1, 1.0, "gpu_kernel"),
                                      KernelRow("k", -1, 1.0, "gpu_kernel")]
    with tempfile.TemporaryDirectory() as tmp:
        _trial(registry, Path(tmp))
        record = load_record(Path(tmp) / "c" / "trial_000" / "record.json")
        assert not (Path(tmp) / "c" / "trial_000" / "kernels.parquet").exists()
    assert record.kernels is None and record.metrics["hostile_n"] == 1
    (line,) = [n for n in record.warnings["hostile"] if "kernel_table" in n]
    assert "calls -1 of 'k' (must be an int >= 0)" in line and "table is left out" in line
