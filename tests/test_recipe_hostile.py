"""Issue 40, item 12: ``aorta sweep run --recipe R`` on a malformed or hostile recipe (a YAML
bomb, Python tags, huge integers, deep nesting, a FIFO, ``/dev/zero``, a folder, bytes that are
not UTF-8, a huge file) is one line naming the file and the problem, exit status 2, fast and in
bounded memory, with nothing run or written; a fuzz of recipe texts holds the same in-process.

Hardware: none (nothing runs: every recipe here is refused before the command after ``--``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run_aorta
from fuzz_helpers import FUZZ, byte_mutations, hypothesis, peak_rss, time_limit

from aorta_core.app.upstream.collect import collector_overrides
from aorta_core.app.upstream.recipe import RecipeError, load
from aorta_core.engine.plugins import load_registry

st = hypothesis.strategies
REPO = Path(__file__).resolve().parents[1]
EXAMPLE = (REPO / "examples" / "upstream" / "probe.yaml").read_bytes()
HEAD = "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n" \
       "diagnostic_axis: [none]\n"
MIB = 1 << 20


def _laughs(levels: int, width: int) -> str:
    """Anchors ``a0``... each ``width`` aliases of the one before, inside a key the schema takes
    (collector options: any value, until a collector reads it)."""
    anchors = [f"&a0 [{', '.join(['lol'] * width)}]"]
    anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return HEAD + f"collect: {{torchprof: {{wait: [{', '.join(anchors)}]}}}}\n"


def _recipe(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "fifo.yaml")
    return folder / "fifo.yaml"


def _zero(folder: Path) -> Path:
    (folder / "zero.yaml").symlink_to("/dev/zero")
    return folder / "zero.yaml"


def _huge(folder: Path) -> Path:
    """A recipe followed by zeros up to a GiB (sparse: no disk used)."""
    path = _recipe(folder, "huge.yaml", HEAD)
    with path.open("r+b") as fh:
        fh.truncate(1 << 30)
    return path


def _folder(folder: Path) -> Path:
    (folder / "dir.yaml").mkdir()
    return folder / "dir.yaml"


#: name -> (what makes the recipe, what its line says after the path)
CASES = {
    "billion laughs": (lambda f: _recipe(f, "r.yaml", _laughs(9, 9)),
                       ": not a recipe aorta reads (line 6: more than 100,000 values once its "
                       "aliases are expanded); "),
    "alias loop": (lambda f: _recipe(f, "r.yaml", HEAD + "collect: &a {torchprof: *a}\n"),
                   ": not a recipe aorta reads (line 6: the alias *a lies inside its own anchor "
                   "(a loop)); "),
    "python object/apply tag": (
        lambda f: _recipe(f, "r.yaml", HEAD.replace(
            "trials: 1", f"trials: !!python/object/apply:os.mkdir ['{f / 'ran'}']")),
        ": not valid YAML (line 3, column 9: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.mkdir'); fix the syntax"),
    "python name tag": (lambda f: _recipe(f, "r.yaml", HEAD + "ticket: !!python/name:os.system\n"),
                        ": not valid YAML (line 6, column 9: could not determine a constructor"),
    "huge integer": (lambda f: _recipe(f, "r.yaml", HEAD.replace("trials: 1",
                                                                 "trials: 1" + "0" * 5000)),
                     ": not valid YAML (line 3, column 9: '100000000000...0000000000000' is no "
                     "int (Exceeds the limit (4300 digits) for integer string conversion: value "
                     "has 5001 digits)); fix the syntax"),
    "huge integer, JSON": (lambda f: _recipe(f, "r.json", '{"schema_version": 1' + "0" * 5000
                                             + "}"),
                           ": not a recipe aorta reads (Exceeds the limit (4300 digits)"),
    "a bool that is none": (lambda f: _recipe(f, "r.yaml", HEAD + "ticket: !!bool maybe\n"),
                            ": not valid YAML (line 6, column 9: 'maybe' is no bool); "),
    "10,000-deep list": (lambda f: _recipe(f, "r.yaml", HEAD + "collect: " + "[" * 10_000
                                           + "]" * 10_000 + "\n"),
                         ": not a recipe aorta reads (line 6: nested deeper than 64 levels); "),
    "10,000-deep mapping": (lambda f: _recipe(f, "r.yaml", HEAD + "collect: " + "{a: " * 10_000
                                              + "1" + "}" * 10_000 + "\n"),
                            ": not a recipe aorta reads (line 6: nested deeper than 64 levels)"),
    "10,000-deep JSON": (lambda f: _recipe(f, "r.json", '{"collect": ' + "[" * 10_000
                                           + "]" * 10_000 + "}"),
                         ": not a recipe aorta reads (nested too deeply); "),
    "a regular expression 30,000 groups deep": (
        lambda f: _recipe(f, "r.yaml", HEAD + f"step_time_regex: '{'(' * 30_000}{')' * 30_000}'\n"),
        ": step_time_regex: not a regular expression aorta can compile (maximum recursion "),
    "not UTF-8": (lambda f: _recipe(f, "r.yaml", HEAD.encode() + b"ticket: caf\xe9\n"),
                  ": not UTF-8 text (byte 0xe9 at offset 99); save it as UTF-8"),
    "NUL": (lambda f: _recipe(f, "r.yaml", HEAD + "ticket: a\x00b\n"),
            ": not valid YAML (unacceptable character #x0000: special characters are not "
            "allowed); fix the syntax"),
    "FIFO": (_fifo, " is not a regular file; give the path of a recipe .yaml"),
    "/dev/zero": (_zero, " is not a regular file; give the path of a recipe .yaml"),
    "a folder": (_folder, " is a folder; give the path of a recipe .yaml"),
    "a GiB": (_huge, " is 1,073,741,824 bytes, not a recipe (a few lines of YAML; aorta reads up "
                     "to 64 KiB); give the path of a recipe .yaml"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_recipe_is_one_line_and_exit_2(tmp_path, case):
    """Was: a traceback (huge integer, deep nesting, regular expression), a hang (FIFO), memory
    without bound (``/dev/zero``, a GiB), or seconds to minutes (billion laughs, once a
    collector's option printed it)."""
    make, said = CASES[case]
    path = make(tmp_path)
    try:
        done = run_aorta(["sweep", "run", "--recipe", str(path), "--", "true"], cwd=tmp_path,
                         timeout=30, memory=2 << 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: still reading after 30 s")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith((f"aorta: error: {path}{said}", f"aorta: error: --recipe {path}{said}")
                           ), line
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing run or written


@contextlib.contextmanager
def _address_space_left(size: int) -> Iterator[None]:
    """This process may map ``size`` bytes more inside the block: a reader that grows without
    bound raises ``MemoryError`` here instead of taking the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="module")
def registry():
    return load_registry()


#: YAML worth putting anywhere in a recipe: anchors and aliases, merge keys, tags (Python's
#: among them), nesting, numbers and scalars Python cannot make, bytes no YAML takes.
YAML_TOKENS = [b"&a ", b"*a", b"&b [*a, *a, *a, *a]", b"<<: *a\n", b"!!python/object/apply:"
               b"os.system ['true'] ", b"!!python/name:os.system ", b"!!int ", b"!!bool ",
               b"!!timestamp ", b"!!binary ", b"!!set ", b"!!float ", b"!!omap ", b"[" * 3000,
               b"{a: " * 200, b"9" * 5000, b"1.0e+999", b".nan", b"2001-13-45", b"0x", b"\x00",
               b"\xff", b"\t", b": ", b"- ", b"\n  ", b"'", b'"', b"%YAML 1.1\n---\n", b"--- ",
               b"...\n", b"? ", b"collect: ", b"torchprof", b"\xef\xbb\xbf"]


def _inserted(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` with 1-5 of :data:`YAML_TOKENS` put in anywhere."""
    spot = st.tuples(st.integers(0, len(data)), st.sampled_from(YAML_TOKENS))

    def apply(spots: list[tuple[int, bytes]]) -> bytes:
        out = data
        for at, token in sorted(spots, reverse=True):
            out = out[:at] + token + out[at:]
        return out
    return st.lists(spot, min_size=1, max_size=5).map(apply)


RECIPES = st.one_of(
    _inserted(EXAMPLE), byte_mutations(EXAMPLE),
    st.builds(_laughs, st.integers(1, 12), st.integers(1, 12)).map(str.encode),
)


@FUZZ
@hypothesis.given(text=RECIPES, suffix=st.sampled_from([".yaml", ".json"]))
def test_any_recipe_text_loads_or_is_one_line(tmp_path_factory, registry, text, suffix):
    """Every recipe text is a recipe (with its collector overrides) or one ``RecipeError`` line
    naming the file, within 10 s and 256 MiB."""
    path = tmp_path_factory.mktemp("fuzz") / f"recipe{suffix}"
    path.write_bytes(text)
    before = peak_rss()
    with time_limit(10), _address_space_left(1 << 30):
        try:
            collector_overrides(path, load(path), None, registry)
        except RecipeError as exc:
            line = str(exc)
            assert len(line.splitlines()) == 1, line
            assert line.startswith((f"{path}", f"--recipe {path}")), line
    assert peak_rss() - before < 256 * MIB
