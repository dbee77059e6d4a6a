"""``aorta compare A B --noise-floor AA`` over real sweeps: the floor from one A/A run split
into halves or from two runs, the floor deciding `significant` and the gate, and the errors."""

from __future__ import annotations

import json
import math
import statistics
import sys

import pytest
from reports.report_helpers import aorta

from aorta_core.reports.significance import compare_rows

STEP = "workload_step_ms"
#: step_ms: BASE + a noise of ±JIT that differs by trial (fixed per trial, so the test does not
#: depend on this machine's speed).
NOISY = ("import json, os; t = int(os.environ['AORTA_TRIAL']); b = float(os.environ['BASE']); "
         "j = float(os.environ['JIT']); json.dump({'step_ms': b + j * ((t * 7) % 5 - 2)}, "
         "open(os.environ['AORTA_METRICS_PATH'], 'w'))")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("floor")

    def sweep(name, trials, base, jit):
        out = root / name
        aorta(f"output={out}", "sweep=repeat", f"trials={trials}", f"+env.BASE={base}",
              f"+env.JIT={jit}", "--", sys.executable, "-c", NOISY, cwd=root)
        return out

    return {"root": root, "a": sweep("a", 6, 100, 1), "b": sweep("b", 6, 103, 1),
            "aa": sweep("aa", 10, 100, 4), "aa1": sweep("aa1", 5, 100, 4),
            "quiet": sweep("quiet", 10, 100, 0.01), "few": sweep("few", 3, 100, 1)}


def _step(done) -> dict:
    out = json.loads(done.stdout)
    return out, next(r for r in out["rows"] if r["metric"] == STEP)


def _floor(first: list[float], second: list[float], n: int) -> float:
    """The documented floor, computed here: the A/A's shift (its interval's centre) plus the
    interval's half-width scaled to n trials a side, over the A/A's median."""
    (s,) = compare_rows([first], [second])
    center = abs(statistics.median(first + second))
    half, shift = (s.ci_high - s.ci_low) / 2, abs(s.ci_high + s.ci_low) / 2
    return (shift + half * math.sqrt((2 / n) / (1 / len(first) + 1 / len(second)))) / center


def test_a_floor_above_the_change_makes_it_not_significant(runs):
    """+3 % with ±1 noise is significant alone; an A/A of ±4 noise puts the floor above 3 %:
    not significant, marked `~` (past the factor 1.01), and the gate passes; a quiet A/A
    keeps it significant."""
    a, b = str(runs["a"]), str(runs["b"])
    plain = _step(aorta("compare", a, b, "--json", cwd=runs["root"]))[1]
    assert plain["significant"] and plain["noise_floor"] is None
    steps = [100 + 4 * ((t * 7) % 5 - 2) for t in range(10)]
    done = aorta("compare", a, b, "--json", "--noise-floor", str(runs["aa"]), "--fail-on",
                 f"{STEP}:1", "--factor", "1.01", cwd=runs["root"], check=False)
    assert done.returncode == 0, done.stderr
    result, row = _step(done)
    assert row["noise_floor"] == pytest.approx(_floor(steps[0::2], steps[1::2], 6))
    assert row["noise_floor"] > 0.03 and row["q"] <= 0.05
    assert not row["significant"] and row["mark"] == "~"
    assert result["noise_floor"].startswith(f"{runs['aa']}, its trials split into halves")
    quiet = aorta("compare", a, b, "--json", "--noise-floor", str(runs["quiet"]), "--fail-on",
                  f"{STEP}:1", cwd=runs["root"], check=False)
    assert quiet.returncode == 1 and f"{STEP}: 3.0% worse (limit 1%)" in quiet.stderr
    assert _step(quiet)[1]["significant"]
    md = aorta("compare", a, b, "--noise-floor", str(runs["aa"]), cwd=runs["root"]).stdout
    assert "and beyond the noise floor" in md and f"noise floor: {runs['aa']}" in md


def test_two_runs_give_the_floor(runs):
    spec = f"{runs['aa']},{runs['aa1']}"
    _, row = _step(aorta("compare", str(runs["a"]), str(runs["b"]), "--json", "--noise-floor",
                         spec, cwd=runs["root"]))
    steps = [100 + 4 * ((t * 7) % 5 - 2) for t in range(10)]
    assert row["noise_floor"] == pytest.approx(_floor(steps, steps[:5], 6))


@pytest.mark.parametrize(("spec", "message"), [
    ("missing", "--noise-floor: {root}/missing is not a folder; pass the output folder of an "
                "A/A run"),
    ("few", "--noise-floor {root}/few: each A/A side needs ≥ 4 passing trials of a metric, "
            "the A/A has at most 3 in all; rerun it with trials=8 or more"),
])
def test_errors_are_one_line_with_the_fix(runs, spec, message):
    root = runs["root"]
    done = aorta("compare", str(runs["a"]), str(runs["b"]), "--noise-floor", str(root / spec),
                 cwd=root, check=False)
    (line,) = done.stderr.splitlines()
    assert done.returncode == 2 and line.startswith(
        "aorta: error: " + message.format(root=root))
