"""What the collectors' fuzz tests share (plugins/*/tests/test_*_fuzz.py): mutations of real
artifacts, hostile files, and the contract every ``parse_metrics`` keeps on all of them.

The contract (issue 13): no exception escapes, no hang, memory bounded by the read limit, and
every value JSON-safe — an int within signed 64 bits, a finite float, a bool, a str that
encodes to UTF-8, or a list of such strs.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import resource
import shutil
import signal
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from needs import need

hypothesis = need("hypothesis")  # the README venv has no hypothesis: skip, naming its install
HealthCheck, settings, st = hypothesis.HealthCheck, hypothesis.settings, hypothesis.strategies

#: Deterministic in CI and modest in size (``AORTA_FUZZ_EXAMPLES=5000`` digs deeper locally);
#: hangs are caught by :func:`time_limit`, not by a deadline (the first example pays for imports
#: and would trip one).
FUZZ = settings(
    max_examples=int(os.environ.get("AORTA_FUZZ_EXAMPLES", 200)),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MIB = 1 << 20


class Hung(BaseException):
    """Raised by :func:`time_limit`; a BaseException so a fail-soft ``except Exception``
    in a parser cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM: also ends a blocking ``open``)."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hung(f"still parsing after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_metrics(metrics: Any, prefix: str) -> None:
    """Assert the metric contract (see the module docstring)."""
    assert isinstance(metrics, dict)
    for key, value in metrics.items():
        assert isinstance(key, str) and key.startswith(prefix), key
        if isinstance(value, list):
            assert all(isinstance(v, str) for v in value), (key, value)
        else:
            assert isinstance(value, bool | int | float | str), (key, value)
        if isinstance(value, int):
            assert INT64_MIN <= value <= INT64_MAX, (key, value)
        if isinstance(value, float):
            assert math.isfinite(value), (key, value)
    orjson.dumps(metrics)  # the record writer's own check (surrogates, ints beyond 64 bits)


def parse_checked(
    parse: Callable[[Path], Any], folder: Path, prefix: str, seconds: float = 20
) -> tuple[dict[str, Any], list[str]]:
    """Metrics and warning texts of ``parse(folder)``, contract checked, within ``seconds``.
    A ``ResourceWarning`` that names no file of ``folder`` is another object's, collected while
    the parse ran (an H100 run caught ``unclosed file <_io.TextIOWrapper name=42 mode='w'>``
    so); one of the parse's own names its file."""
    with warnings.catch_warnings(record=True) as caught, time_limit(seconds):
        warnings.simplefilter("always")
        metrics = parse(folder)
    check_metrics(metrics, prefix)
    return metrics, [str(w.message) for w in caught if str(folder) in str(w.message)
                     or not issubclass(w.category, ResourceWarning)]


# -- mutations --------------------------------------------------------------------------------

#: Numbers, as JSON text, that a count, time or id of a damaged or hostile artifact may hold
#: (``json.dumps`` cannot write the non-finite ones or the 400 digits).
HOSTILE_NUMBERS = ["1e300", "1.7e308", str(2**70), str(-(2**70)), "-1", "0", "NaN", "-Infinity",
                   "1e400", "9" * 400]
#: Other JSON text ``json.dumps`` cannot write: a lone surrogate, nesting past every decoder's
#: recursion limit.
_RAW = [*HOSTILE_NUMBERS, '"\\ud800"', "[" * 10_000 + "]" * 10_000,
        '{"a":' * 10_000 + "0" + "}" * 10_000]
_SENTINEL = "\x00raw:"
_SENTINEL_JSON = re.compile(r'"\\u0000raw:(?:[^"\\]|\\.)*"')
HOSTILE = st.one_of(
    st.sampled_from([_SENTINEL + raw for raw in _RAW]),
    st.sampled_from([2**64, 0.5, 1e-320, True, None, "inf", "NaN", "1e300", "", "x" * 5000, [],
                     {}, [0, 1], {"a": 1}]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
#: Byte strings worth inserting into any artifact.
TOKENS = [b"1e300", b"-1", b"99999999999999999999999", b"NaN", b"inf", b"null", b'"', b",",
          b"\n", b"\r", b"\x00", b"\xff\xfe", b"{", b"}", b"[" * 2000, b"]", b"\\u", b"true"]


def _swap(value: Any) -> Any:
    """The same data in another JSON type (list <-> dict, number <-> str, ...)."""
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, str):
        return None if value else 0
    if value is None or isinstance(value, bool):
        return "null"
    return str(value)


def _keys(doc: Any, found: set[str], numbers_only: bool = False) -> set[str]:
    """The keys used anywhere in ``doc`` (only those holding a number somewhere)."""
    if isinstance(doc, dict):
        found.update(k for k, v in doc.items() if not numbers_only or type(v) in (int, float))
        for value in doc.values():
            _keys(value, found, numbers_only)
    elif isinstance(doc, list):
        for value in doc:
            _keys(value, found, numbers_only)
    return found


def _edit(doc: Any, key: str, new: Any, left: list[float]) -> Any:
    """``doc`` with the value of ``key`` replaced, ``left[0]`` times at most (first ones)."""
    if isinstance(doc, list):
        return [_edit(v, key, new, left) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out = {}
    for k, v in doc.items():
        if k == key and left[0] > 0:
            left[0] -= 1
            out[k] = _swap(v) if new == "swap" else new
        else:
            out[k] = _edit(v, key, new, left)
    return out


def dumps(doc: Any) -> bytes:
    """JSON of ``doc``, each sentinel string replaced by the raw text it carries."""
    return _SENTINEL_JSON.sub(
        lambda m: json.loads(m.group())[len(_SENTINEL):], json.dumps(doc)
    ).encode()


def hostile_fields(doc: Any, only: set[str] | None = None) -> Iterator[bytes]:
    """``doc`` with one numeric field (of ``only``, if given) set to one hostile value, for each
    such field and value: every occurrence to a :data:`HOSTILE_NUMBERS` one, the first to a lone
    surrogate or 10,000-deep nesting. The cases a fuzzer draws too rarely to rely on."""
    numeric = _keys(doc, set(), numbers_only=True)
    for key in sorted(numeric & only if only else numeric):
        for raw in _RAW:
            times = math.inf if raw in HOSTILE_NUMBERS else 1
            yield dumps(_edit(doc, key, _SENTINEL + raw, [times]))


def json_mutations(doc: Any) -> st.SearchStrategy[bytes]:
    """``doc`` with 1-3 fields (by key name, anywhere in it) swapped to another type or set to
    a hostile value (huge, negative, NaN, 10,000-deep, ...), or the whole document replaced."""
    keys = sorted(_keys(doc, set()))
    edit = st.tuples(st.sampled_from(keys), st.booleans(), st.just("swap") | HOSTILE)

    def apply(edits: list[tuple[str, bool, Any]]) -> bytes:
        out = doc
        for key, every, new in edits:
            out = _edit(out, key, new, [math.inf if every else 1])
        return dumps(out)

    return st.lists(edit, min_size=1, max_size=3).map(apply) | HOSTILE.map(dumps)


def byte_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` truncated, with bytes flipped, deleted, or hostile tokens inserted."""
    n = len(data)
    op = st.one_of(
        st.tuples(st.just("cut"), st.integers(0, n), st.just(b"")),
        st.tuples(st.just("flip"), st.integers(0, n), st.binary(min_size=1, max_size=4)),
        st.tuples(st.just("insert"), st.integers(0, n), st.sampled_from(TOKENS)),
        st.tuples(st.just("delete"), st.integers(0, n), st.integers(1, 64)),
    )

    def apply(ops: list[tuple[str, int, Any]]) -> bytes:
        out = data
        for kind, at, arg in ops:
            if kind == "cut":
                out = out[:at]
            elif kind == "flip":
                out = out[:at] + arg + out[at + len(arg):]
            elif kind == "insert":
                out = out[:at] + arg + out[at:]
            else:
                out = out[:at] + out[at + arg:]
        return out

    return st.lists(op, min_size=1, max_size=4).map(apply)


def damaged_files(seeds: list[Path]) -> st.SearchStrategy[tuple[str, bytes]]:
    """(name, bytes) of one of ``seeds`` after :func:`byte_mutations`."""
    return st.sampled_from(seeds).flatmap(
        lambda p: st.tuples(st.just(p.name), byte_mutations(p.read_bytes()))
    )


# -- hostile files ----------------------------------------------------------------------------

Parse = Callable[[Path], tuple[dict[str, Any], list[str]]]


def add_hostile_files(folder: Path, suffix: str, outside: Path) -> list[Path]:
    """A FIFO, a link to /dev/zero and a link to ``outside`` (a real artifact elsewhere), all
    named ``*<suffix>`` in ``folder``."""
    fifo, zero, out = (folder / f"{stem}{suffix}" for stem in ("fifo", "zero", "out"))
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    out.symlink_to(outside)
    return [fifo, zero, out]


def check_hostile_files_skipped(
    parse: Parse, folder: Path, suffix: str, outside: Path, where: Path | None = None
) -> None:
    """:func:`add_hostile_files` in ``where`` (default ``folder``) changes no metric of
    ``folder``, and a warning names each of them."""
    expected, _ = parse(folder)
    bad = add_hostile_files(where or folder, suffix, outside)
    metrics, warned = parse(folder)
    assert metrics == expected
    for path in bad:
        assert any(f"{path} " in w and w.endswith("; its metrics are omitted") for w in warned)


def parse_over_limit(
    parse: Parse, folder: Path, expected: dict[str, Any], monkeypatch: Any
) -> list[str]:
    """Warnings of ``parse(folder)`` under a 4 MiB read limit, after checking that the
    oversized file in it moved neither the metrics (``expected``, taken without it) nor this
    process's peak memory."""
    monkeypatch.setenv("AORTA_READ_LIMIT_MB", "4")
    before = peak_rss()
    metrics, warned = parse(folder)
    assert peak_rss() - before < 64 * MIB, "memory followed the file, not the read limit"
    assert metrics == expected
    return warned


def gz_bomb(path: Path, gib: int) -> None:
    """A few MB of gzip that decompresses to ``gib`` GiB of spaces (concatenated members)."""
    member = gzip.compress(b" " * (16 * MIB), compresslevel=9)
    path.write_bytes(member * (gib * 64))


def sparse(path: Path, head: bytes, gib: int) -> None:
    """``head`` followed by zeros up to ``gib`` GiB, without using the disk."""
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(gib << 30)


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def edit_columns(rows: list[list[str]], edits: list[tuple[str, int, str, bool]],
                 head: int = 1) -> list[list[str]]:
    """A CSV table with columns renamed, dropped, or set to ``text`` in the first data row (or in
    every row below the ``head`` header rows, with ``every``)."""
    rows = [list(r) for r in rows]
    for kind, col, text, every in edits:
        col %= len(rows[0])
        if kind == "rename":
            rows[0][col] = text
        elif kind == "drop":
            rows = [r[:col] + r[col + 1:] for r in rows]
        else:
            for r in rows[1:None if every else head + 1]:
                r[col:col + 1] = [text]
    return rows


# -- a leading UTF-8 BOM ----------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def _with_bom(path: Path) -> None:
    """``path`` rewritten with a BOM before its text (inside the gzip stream of a ``.gz``)."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(BOM + gzip.decompress(data)))
    else:
        path.write_bytes(BOM + data)


def cli_metrics(collector: str, folder: Path) -> dict[str, Any]:
    """``aorta parse <collector> <folder>``'s metrics (the real CLI), without the folder path."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "aorta_core", "parse", collector, str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    del metrics[f"{collector}_artifact_dir"]
    return metrics


def check_bom_is_ignored(collector: str, fixture: Path, tmp: Path) -> None:
    """Each file of ``fixture`` with a BOM prepended gives ``aorta parse`` the metrics it gives
    without (and there are some)."""
    plain = cli_metrics(collector, fixture)
    assert plain, f"{fixture} gives no metric to compare"
    folder = tmp / f"bom_{fixture.name}"
    shutil.copytree(fixture, folder)
    for path in folder.rglob("*"):
        if path.is_file():
            _with_bom(path)
    assert cli_metrics(collector, folder) == plain
