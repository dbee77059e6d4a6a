"""``aorta compare`` as a CI gate that cannot pass silently (issue 41, points 4 and 9; issue 40,
point 15): cells pair by what they are, not by names that carry a whole run's overrides;
nothing compared is an error; a baseline of 0 or below is judged by its difference; no
significance below the minimum number of trials; hostile thresholds are usage errors.

Every run is a real sweep of a payload whose metrics are fixed per trial (so no assertion
depends on this machine's speed); ``K`` scales them, set per run with ``+env.K=8`` as the
documented way to set a trial's environment.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from reports.report_helpers import aorta

from aorta_core.reports.significance import inconclusive, min_trials

#: step_ms: k * (10 + t); idle_ms: 0 at k = 1 (a zero baseline); gain_per_s (higher is better)
#: and offset_ms (lower is better): negative at k = 1.
PAYLOAD = ("import json, os; t = int(os.environ['AORTA_TRIAL']); "
           "k = float(os.environ.get('K', '1')); json.dump({'step_ms': k * (10 + t), "
           "'idle_ms': (k - 1) * (10 + t), 'gain_per_s': 2 * k - 12 + t, "
           "'offset_ms': -20 / k - t}, open(os.environ['AORTA_METRICS_PATH'], 'w'))")
OTHER = "import json, os; json.dump({'other_ms': 1}, open(os.environ['AORTA_METRICS_PATH'], 'w'))"
RUNS = {
    "plain": ("trials=4",),  # 4 a side: the fewest at which the U test reaches p < 0.05
    "slow": ("trials=4", "+env.K=8"),
    "slow2": ("trials=2", "+env.K=8"),
    "modes_ab": ("-m", "trials=1", "+env.MODE=a,b"),
    "modes_cd": ("-m", "trials=1", "+env.MODE=c,d"),
}
SLOW = "default → env.K=8"


class _Runs(dict):
    """Each run made by the first test that reads it."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Path:
        out = self.root / name
        payload = OTHER if name == "other" else PAYLOAD
        done = aorta(f"output={out}", *RUNS.get(name, ("trials=1",)), "sweep=repeat", "--",
                     sys.executable, "-c", payload, cwd=self.root)
        assert done.returncode == 0, done.stderr
        self[name] = out
        return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return _Runs(tmp_path_factory.mktemp("gate"))


def _compare(runs, a: str, b: str, *args: str):
    return aorta("compare", str(runs[a]), str(runs[b]), *args, cwd=runs.root, check=False)


def _rows(done) -> dict[tuple[str, str], dict]:
    return {(r["cell"], r["metric"]): r for r in json.loads(done.stdout)["rows"]}


def test_an_override_of_the_whole_run_pairs_cells_and_the_gate_fails(runs):
    """The issue's run: B is A with ``+env.K=8`` (8x slower). Its override is in B's cell name,
    yet the cells pair, the override is named first, and the gate fails."""
    done = _compare(runs, "plain", "slow", "--fail-on", "workload_step_ms:10")
    assert done.returncode == 1, done.stderr
    head = done.stdout[:done.stdout.index("| | cell |")]
    first = next(ln for ln in head.splitlines() if ln.startswith("- "))
    assert first == ("- the two runs set the override env.K differently in every cell: "
                     "A unset, B `8`")
    assert "Cells paired by their axes without env.K (set for the whole run, differently in " \
        "each)." in head
    assert f"| `+` | {SLOW} | workload_step_ms |" in done.stdout
    assert f"--fail-on: {SLOW} workload_step_ms: 700.0% worse (limit 10%)" in done.stderr
    rows = _rows(_compare(runs, "plain", "slow", "--json"))
    row = rows[(SLOW, "workload_step_ms")]
    assert (row["baseline_cell"], row["candidate_cell"]) == ("default", "env.K=8")
    assert (row["baseline"], row["candidate"], row["ratio"]) == (11.5, 92.0, 8.0)
    assert row["p_value"] < 0.05 and row["untested"] == "" and row["significant"]
    assert rows[(SLOW, "wall_time_s")]["difference"] is not None  # the wall time is compared


def test_no_cell_pairs_is_an_error_and_pair_pairs_them(runs):
    """Cells that vary the same key over other values pair with nothing: the table is shown,
    then one line naming the problem and the fix, status 2, even with a gate; ``--pair``
    pairs them."""
    for extra in ([], ["--fail-on", "workload_step_ms:10"]):
        done = _compare(runs, "modes_ab", "modes_cd", *extra)
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            f"aorta: error: no cell of {runs['modes_ab']} pairs with a cell of "
            f"{runs['modes_cd']}, nothing was compared (A: env.MODE=a, env.MODE=b; B: "
            "env.MODE=c, env.MODE=d); pair them with --pair A_CELL B_CELL or --match KEY[,KEY]"]
        assert "| `x` | env.MODE=c | workload_step_ms |" in done.stdout
    paired = _compare(runs, "modes_ab", "modes_cd", "--json", "--pair", "env.MODE=a",
                      "env.MODE=c", "--pair", "env.MODE=b", "env.MODE=d")
    assert paired.returncode == 0, paired.stderr
    result = json.loads(paired.stdout)
    assert result["pairing"] == "Cells paired as --pair says."
    assert {c for c, _ in _rows(paired)} == {"env.MODE=a → env.MODE=c",
                                            "env.MODE=b → env.MODE=d"}
    one = _compare(runs, "modes_ab", "modes_cd", "--json", "--pair", "env.MODE=b",
                   "env.MODE=c")
    assert one.returncode == 0
    assert json.loads(one.stdout)["pairing"] == "Cells paired as --pair says, the others by name."
    marks = {c: r["mark"] for (c, m), r in _rows(one).items() if m == "workload_step_ms"}
    assert marks == {"env.MODE=b → env.MODE=c": " ", "env.MODE=a": "x", "env.MODE=d": "x"}


def test_match_pairs_on_the_named_axes(runs, tmp_path):
    """Cells of a sweeper that sets two keys together (not a grid), edited into a real run's
    matrix.json: B's cells are MODE=a with X=1 and MODE=b with X=2 (named as the sweeper
    likes), X absent from A. X varies in B, so nothing pairs by itself; ``--match env.MODE``
    pairs on MODE alone."""
    zipped = shutil.copytree(runs["modes_cd"], tmp_path / "zipped")
    matrix = json.loads((zipped / "matrix.json").read_text())
    for cell, mode, x in zip(matrix["cells"], "ab", "12", strict=True):
        cell["axes"] = {"env.MODE": mode, "X": x}
    (zipped / "matrix.json").write_text(json.dumps(matrix))
    a = str(runs["modes_ab"])
    assert aorta("compare", a, str(zipped), cwd=tmp_path, check=False).returncode == 2
    done = aorta("compare", a, str(zipped), "--json", "--match", "env.MODE", cwd=tmp_path,
                 check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pairing"] == "Cells paired on the axes env.MODE (--match)."
    assert {c for c, _ in _rows(done)} == {"env.MODE=a → env.MODE=c", "env.MODE=b → env.MODE=d"}


@pytest.mark.parametrize(("args", "message"), [
    (["--match", "env.NOPE"], "--match env.NOPE: no cell of either run has the axis env.NOPE "
                              "(axes: env.MODE)"),
    (["--match", "env.MODE,"], "--match env.MODE,: an empty key; name the axes"),
    (["--pair", "env.MODE=a", "env.MODE=z"], "--pair env.MODE=a env.MODE=z: run B has no cell "
                                             "env.MODE=z (its cells: env.MODE=a, env.MODE=b)"),
    (["--pair", "env.MODE=a", "env.MODE=a", "--pair", "env.MODE=a", "env.MODE=b"],
     "--pair: cell env.MODE=a of run A is paired twice; give each cell one partner"),
])
def test_bad_pairing_is_a_usage_error(runs, args, message):
    done = _compare(runs, "modes_ab", "modes_ab", *args)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"aorta: error: {message}")


def test_match_that_leaves_a_cell_two_partners_is_a_usage_error(runs):
    done = _compare(runs, "modes_ab", "slow", "--match", "env.K")
    (line,) = done.stderr.splitlines()
    assert done.returncode == 2 and line == (
        "aorta: error: --match: cells env.MODE=a, env.MODE=b of run A have the same values of "
        "the matched axes; add the axis that tells them apart to --match, or pair them with "
        "--pair A_CELL B_CELL")


def test_a_gate_on_a_metric_no_pair_measured_fails(runs):
    """B measures other metrics than A: the gate's metric is in A only, so it checks nothing and
    says so (status 1); a metric in neither run stays a usage error."""
    done = _compare(runs, "plain", "other", "--fail-on", "workload_step_ms:10")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "aorta: error: --fail-on: workload_step_ms: no pair of cells measured it in both runs, "
        "nothing to check; gate a metric both runs measure, or pair the cells that do with "
        "--pair/--match"]
    assert _compare(runs, "plain", "other", "--fail-on", "wall_time_s:1000").returncode == 0


def test_zero_and_negative_baselines_are_judged_by_the_difference(runs):
    """idle_ms goes 0 -> 80.5 (worse: lower is better), gain_per_s -8.5 -> 5.5 (better: higher
    is better), offset_ms -21.5 -> -4 (worse): no ratio, the signed difference, the right mark;
    the gate fails on the zero baseline and not on the better one."""
    done = _compare(runs, "plain", "slow", "--json")
    rows = _rows(done)
    expected = {"workload_idle_ms": (0.0, 80.5, "+"),
                "workload_gain_per_s": (-8.5, 5.5, "-"),
                "workload_offset_ms": (-21.5, -4.0, "+")}
    for metric, (base, cand, mark) in expected.items():
        row = rows[(SLOW, metric)]
        assert (row["baseline"], row["candidate"], row["mark"]) == (base, cand, mark), metric
        assert row["ratio"] is None and row["difference"] == cand - base
        assert row["note"] == "baseline ≤ 0: compared by the difference"
    table = _compare(runs, "plain", "slow").stdout
    assert (f"| `+` | {SLOW} | workload_idle_ms | 0 (n=4) | 80.5 (n=4) | Δ +80.5 (baseline "
            "≤ 0: compared by the difference) |") in table
    gate = _compare(runs, "plain", "slow", "--fail-on", "workload_idle_ms:50", "--fail-on",
                    "workload_gain_per_s:0", "--fail-on", "workload_offset_ms:80")
    assert gate.returncode == 1
    assert gate.stderr.splitlines() == [
        f"aorta: error: --fail-on: {SLOW} workload_idle_ms: worse than a baseline of 0 "
        "(0 → 80.5) (limit 50%)",
        f"aorta: error: --fail-on: {SLOW} workload_offset_ms: 81.4% worse (limit 80%)"]
    back = _rows(_compare(runs, "slow", "plain", "--json"))  # from 80.5 to 0: a ratio again
    assert back[("env.K=8 → default", "workload_idle_ms")]["mark"] == "-"


def test_too_few_trials_make_no_significance_claim(runs):
    """4 trials against 2: no p-value, the row says why, its mark and the gate go by the
    factor and the percentage alone (a gate never passes because a row was untestable)."""
    too_few = inconclusive(0.05)
    assert min_trials(0.05) == 4 and too_few == "inconclusive: needs ≥ 4 trials per side"
    done = _compare(runs, "plain", "slow2", "--json", "--fail-on", "workload_step_ms:10")
    assert done.returncode == 1
    row = _rows(done)[(SLOW, "workload_step_ms")]
    assert (row["n_baseline"], row["n_candidate"], row["p_value"], row["q"]) == (4, 2, None,
                                                                                None)
    assert row["untested"] == too_few and row["mark"] == "+" and not row["significant"]
    assert (f"--fail-on: {SLOW} workload_step_ms: 630.4% worse (limit 10%, {too_few})"
            in done.stderr)
    table = _compare(runs, "plain", "slow2").stdout
    assert f"| 7.304 | +72.5 | {too_few} | — | — | lower |" in table
    assert "(when both sides have ≥ 4 passing trials)" in table


@pytest.mark.parametrize(("args", "message"), [
    (["--factor", "nan"], "--factor nan: expected a finite number >= 1"),
    (["--factor", "inf"], "--factor inf: expected a finite number >= 1"),
    (["--factor", "0.5"], "--factor 0.5: expected a finite number >= 1"),
    (["--alpha", "nan"], "--alpha nan: expected a significance level between 0 and 1"),
    (["--alpha", "0"], "--alpha 0: expected a significance level between 0 and 1"),
    (["--alpha", "1"], "--alpha 1: expected a significance level between 0 and 1"),
    (["--alpha=-inf"], "--alpha -inf: expected a significance level between 0 and 1"),
    (["--fail-on", "wall_time_s:nan"], "--fail-on 'wall_time_s:nan': expected <metric>:<percent>"),
    (["--fail-on", "wall_time_s:inf"], "--fail-on 'wall_time_s:inf': expected <metric>:<percent>"),
    (["--fail-on", "wall_time_s:-5"], "--fail-on 'wall_time_s:-5': expected <metric>:<percent>"),
])
def test_hostile_thresholds_are_usage_errors(runs, args, message):
    done = _compare(runs, "plain", "plain", *args)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"aorta: error: {message}")
