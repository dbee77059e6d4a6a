"""Issue 23, fuzzed command lines: any Hydra override (random keys and values, quoting, ``+``/``~``
/``++``, sweep syntax, interpolations and resolver errors, unicode, NUL, long strings, lists and
mappings for the core's keys) is composed or refused before anything runs, with one line.

The property runs the pre-check that ``python -m aorta_core`` runs first (the cheapest public
entry: it composes the command line and each swept value as Hydra's sweeper will); a handful of
command lines it found go through the real CLI, to show the line, the exit status and that
nothing is written. The payload is ``true``: no GPU is used, and the result is the same on a
machine with one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta
from needs import need

from aorta_core.app import searchpath
from aorta_core.app.precheck import UsageError, check

hypothesis = need("hypothesis")
st = hypothesis.strategies

#: Each example composes Hydra's config a few times (~0.1 s); AORTA_FUZZ_EXAMPLES digs deeper.
FUZZ = hypothesis.settings(
    max_examples=int(os.environ.get("AORTA_FUZZ_EXAMPLES", 60)), deadline=None,
    derandomize=True, database=None)

#: The core's keys, some of Hydra's and the collectors', and near misses.
KEYS = ["trials", "timeout", "hook_timeout", "read_limit_mb", "output", "env", "env.X", "retain",
        "retain.on_pass", "retain.on_fail", "devices", "devices_per_cell", "device_env",
        "allow_failures", "timeline", "diagnose", "requires_command", "command", "workload",
        "sweep", "collector", "collector.torchprof.wait", "collector.ncu.set",
        "collector.proton.mode", "workload.batch_size", "workload.inject.host_ms", "hydra.verbose",
        "hydra.job.chdir", "hydra.sweeper.params", "hydra.launcher", "hydra/launcher", "cell",
        "agree", "trails", "", "a.b.c", "é"]
#: Values of every type and shape Hydra's grammar reads, and text that is not quite one.
VALUES = ["1", "0", "-1", "1e309", "nan", "inf", "-inf", "9" * 30, "null", "true", "''", '""',
          "abc", "é", "\x00", "a\x00b", "a\nb", "\u2028", "x" * 5000, "1.5", "0x10", "1_000",
          "${oc.env:NOPE}", "${oc.env:HOME}", "${trials}", "${nope}", "${oc.decode:'[1'}",
          "${oc.create:{a:1}}", "${oc.select:trials}", "${", "}", "$", "\\", "'", '"', "[1,2]",
          "[]", "{}", "{a:1}", "[[1]]", "{a:[1,{b:2}]}", "1,2", "a,b", "range(1,3)", "range(0)",
          "range(0,inf)", "range(0,1,0)", "range(0,nan)", "range(1,1e12)", "range(0,1,0.25)",
          "choice(1,2)", "choice()", "glob(*)", "glob(t*)", "interval(0,1)", "tag(x,1)",
          "sort(3,1)", "shuffle(1,2)", "range(1,3),5", "1,glob(*)", "repeat", "default",
          "torchprof", "ncu", "proton", "rocprof", "benchmark", "full", "none"]
_value = st.one_of(
    st.sampled_from(VALUES),
    st.text(max_size=12),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=3).map(lambda v: f"[{','.join(v)}]"),
    st.lists(st.sampled_from(VALUES), min_size=2, max_size=3).map(",".join),
    st.builds("{{{}:{}}}".format, st.sampled_from(KEYS), st.sampled_from(VALUES)),
)
OVERRIDES = st.lists(
    st.builds("{}{}{}{}".format, st.sampled_from(["", "", "+", "++", "~"]),
              st.sampled_from(KEYS) | st.text(max_size=6),
              st.sampled_from(["=", "=", "=", ""]), _value),
    max_size=3)
BASES = [["sweep=repeat", "trials=1"], ["sweep=repeat"], ["-m", "sweep=repeat"], []]


@pytest.fixture(scope="module", autouse=True)
def _collectors() -> None:
    searchpath.install()  # what the CLI does before its pre-check: collectors' configs composable


@FUZZ
@hypothesis.given(base=st.sampled_from(BASES), overrides=OVERRIDES)
def test_any_override_is_composed_or_refused_in_one_line(base: list[str],
                                                         overrides: list[str]) -> None:
    try:
        check([*base, *overrides], ["true"])
    except UsageError as exc:
        assert len(str(exc).splitlines()) == 1, str(exc)


#: Command lines the property found refused with a traceback or a hang, or with a broken line;
#: each must be one line (``<out>``: the output folder), exit status 2, nothing written.
REFUSED = {
    "+=default": "'+=default' names no key; give key=value, e.g. trials=1",
    "+cell=range(0,inf)": ("+cell=range(0,inf): range(start, stop, step) needs finite bounds "
                           "and a step other than 0"),
    "+cell=range(0,1e12)": ("the sweep has more than 100000 jobs (+cell=range(0,1e12) and the "
                            "axes before it); sweep fewer values, or split it into several "
                            "sweeps"),
    "+collector.torchprof.wait=1": ("collector.torchprof is given, but no cell selects "
                                    "collector torchprof: add collector=torchprof (or "
                                    "collector=[torchprof,...] with others, or "
                                    "-m collector=torchprof,... to sweep it)"),
    "trials=" + "9" * 30: f"trials={'9' * 30} is more than 100000, the most one cell runs",
    "trials=glob(*)": ("trials=glob(*) sweeps no value (an empty range or a glob that matches "
                       "nothing); give at least one"),
    "+cell=range(1,3),5": ("+cell=range(1,3),5: a sweep (range, interval, glob, choice) cannot "
                           "be one of a list's values; give the values as a,b,c or one range()"),
    "a\nb": ("'a\\nb' is not an override (key=value): put the workload command after `--`, e.g. "
             "python -m aorta_core sweep=repeat trials=1 -- 'a\\nb' output=<out>"),
    "timeout=${oc.env:AORTA_TEST_UNSET}": ("timeout: KeyError raised while resolving "
                                           "interpolation: \"Environment variable "
                                           "'AORTA_TEST_UNSET' not found\""),
}


@pytest.mark.parametrize("override", list(REFUSED))
def test_a_refused_override_is_one_line_and_writes_nothing(tmp_path: Path, override: str) -> None:
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", override, f"output={out}", "--", "true"],
                     cwd=tmp_path)
    line = REFUSED[override].replace("<out>", str(out))
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"aorta: error: {line}"])
    assert not out.exists()


def test_hostile_values_that_compose_run_or_refuse_their_cell(tmp_path: Path) -> None:
    """Values the pre-check lets through (an interpolation, unicode, quoted commas) run as given;
    a swept value the core refuses when its job is composed (an unset variable) costs its cell
    alone: exit status 1, the matrix is written."""
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "+env.X=${oc.env:HOME}", "+env.Y='é a,b'",
                      "+env.Z=1,${oc.env:AORTA_TEST_UNSET}", f"output={out}", "--", "sh", "-c",
                      'test "$X" = "$HOME" && test "$Y" = "é a,b"'], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert [(r["axes"]["env.Z"], r["verdict"]) for r in records(out)] == [("1", "pass")]
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    assert sorted(bool(c["error"]) for c in cells) == [False, True]


@pytest.mark.parametrize(("name", "line"), [
    ("x" * 300, "cannot be a folder (File name too long); choose another output=<dir>"),
    ("b\udcff", "is not UTF-8 text, which the matrix and the reports name their files in; "
                "choose a folder name in UTF-8"),
], ids=["too_long", "not_utf8"])
def test_an_output_no_folder_can_have_is_one_line(tmp_path: Path, name: str, line: str) -> None:
    """Was a traceback (a name past the file system's limit) or a sweep whose trials ran and
    whose matrix then failed (bytes that are not UTF-8)."""
    done = run_aorta(["sweep=repeat", "trials=1", f"output={name}", "--", "true"], cwd=tmp_path)
    assert (done.returncode, done.stderr.splitlines()) == (
        2, [f"aorta: error: output={name!r} {line}".replace("\udcff", "\\udcff")])
    assert list(tmp_path.iterdir()) == []
