"""``aorta compare`` over real sweeps made by the real CLI; the significance test on tables.

The sweeps' payloads report a fixed ``workload_step_ms`` per trial (reports/conftest.py), so the
marks asserted here do not depend on how fast this machine runs.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys

import pytest
from needs import need
from pytest import approx
from reports.report_helpers import aorta

from aorta_core.reports.compare import _mark, _moved, higher_is_better

STEP = "workload_step_ms"


def _rows(done) -> dict[tuple[str, str], dict]:
    return {(r["cell"], r["metric"]): r for r in json.loads(done.stdout)["rows"]}


def test_slower_run_is_marked_worse_and_fails_ci(sweeps, tmp_path):
    done = aorta("compare", str(sweeps["fast"]), str(sweeps["slow"]), "--fail-on",
                 f"{STEP}:20", cwd=tmp_path)
    assert done.returncode == 1
    row = next(ln for ln in done.stdout.splitlines() if STEP in ln)
    assert row.startswith(f"| `+` | default | {STEP} |")
    assert f"{STEP}: " in done.stderr and "worse (limit 20%)" in done.stderr
    back = aorta("compare", str(sweeps["slow"]), str(sweeps["fast"]), "--json", "--fail-on",
                 "workload_*:20", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    r = _rows(back)[("default", STEP)]
    assert r["mark"] == "-" and r["n_baseline"] == r["n_candidate"] == 5
    assert (r["baseline"], r["candidate"]) == (42.0, 12.0)  # medians of 40-44 and 10-14
    assert r["ratio"] == approx(12 / 42) and r["p_value"] < 0.05
    # 5 against 5 all apart: the exact two-sided p is 2 / C(10, 5); the q of the cell's family
    # (its 2 metrics) is BH's, and the interval holds the difference
    assert r["p_value"] == approx(2 / 252) and r["significant"] and r["noise_floor"] is None
    ps = sorted(row["p_value"] for row in _rows(back).values())
    assert r["q"] == approx(min(p * len(ps) / rank for rank, p in enumerate(ps, 1)
                                if p >= r["p_value"]))
    assert r["ci_low"] <= r["difference"] == -30 <= r["ci_high"]


def test_same_run_is_unchanged(proton_sweep, tmp_path):
    done = aorta("compare", str(proton_sweep), str(proton_sweep), "--json", cwd=tmp_path)
    rows = _rows(done)
    assert {r["mark"] for r in rows.values()} == {" "}
    assert {m for _, m in rows} >= {"proton_gpu_time_ms", "proton_kernel_count", "wall_time_s"}
    assert all(r["ratio"] == 1.0 for r in rows.values())


def test_newly_failing_and_fixed(sweeps, tmp_path):
    done = aorta("compare", str(sweeps["fast"]), str(sweeps["broken"]), "--fail-on",
                 f"{STEP}:50", cwd=tmp_path)
    assert done.returncode == 1 and "newly failing" in done.stderr
    assert f"| `!` | default | {STEP} |" in done.stdout
    fixed = aorta("compare", str(sweeps["broken"]), str(sweeps["fast"]), cwd=tmp_path)
    assert fixed.returncode == 0 and f"| `*` | default | {STEP} |" in fixed.stdout


def test_other_environment_is_not_comparable(sweeps, tmp_path):
    """The candidate's torch and GPU are changed to ones no machine running this test has; the
    baseline's are what this machine recorded (a GPU host records its GPUs)."""
    (here,) = json.loads((sweeps["fast"] / "matrix.json").read_text())["environments"]
    here_gpus = ", ".join(sorted(g["name"] for g in here["gpus"])) or "none"
    other = tmp_path / "other"
    shutil.copytree(sweeps["slow"], other)
    matrix = json.loads((other / "matrix.json").read_text())
    matrix["environments"][0]["packages"]["torch"] = "2.99.0"
    matrix["environments"][0]["host"] = "elsewhere"  # named, but comparable on its own
    matrix["environments"][0]["gpus"] = [{"vendor": "amd", "name": "AMD Instinct MI999X",
                                         "driver": "9.9.9"}]
    (other / "matrix.json").write_text(json.dumps(matrix))
    done = aorta("compare", str(sweeps["fast"]), str(other), "--fail-on", f"{STEP}:5",
                 cwd=tmp_path)
    assert done.returncode == 1
    assert f"| `x` | default | {STEP} |" in done.stdout
    assert f"- torch: {here['packages']['torch']} vs 2.99.0" in done.stdout
    assert f"- GPU: {here_gpus} vs AMD Instinct MI999X" in done.stdout
    named = done.stdout[:done.stdout.index("| | cell |")]  # before any metric
    assert (f"- the two runs ran different versions of torch: A `{here['packages']['torch']}`, "
            "B `2.99.0` (makes the runs not comparable)") in named
    assert "- the two runs ran on different GPUs: A " in named
    assert f"- the two runs ran on different hosts: A `{here['host']}`, B `elsewhere`\n" in named
    assert "runs are not comparable, cannot check" in done.stderr
    forced = aorta("compare", str(sweeps["fast"]), str(other), "--allow-env-mismatch",
                   cwd=tmp_path)
    assert f"| `+` | default | {STEP} |" in forced.stdout


def _before_metrics(done) -> list[str]:
    """The lines of ``aorta compare``'s Markdown above its table of metrics."""
    return done.stdout[:done.stdout.index("| | cell | metric |")].splitlines()


def test_runs_that_ran_different_commands_say_so_before_any_metric(sweeps, tmp_path):
    """fast and slow ran the same payload with another base step time: the first thing said is
    that their commands differ, with both commands (from matrix.json)."""
    commands = [shlex.join(json.loads((sweeps[n] / "matrix.json").read_text())["cells"][0][
        "command"]) for n in ("fast", "slow")]
    done = aorta("compare", str(sweeps["fast"]), str(sweeps["slow"]), "--json", cwd=tmp_path)
    (diff,) = json.loads(done.stdout)["differences"]
    assert (diff["aspect"], diff["baseline"], diff["candidate"]) == (
        "command", commands[:1], commands[1:])
    assert diff["text"] == (f"the two runs ran different commands: A `{commands[0]}`, "
                            f"B `{commands[1]}`")
    lines = _before_metrics(aorta("compare", str(sweeps["fast"]), str(sweeps["slow"]),
                                  cwd=tmp_path))
    said = [ln for ln in lines if ln.startswith("- the two runs ran different commands: A ")]
    assert len(said) == 1 and "10 + int" in said[0] and "40 + int" in said[0]
    assert "**What differs between the two runs:**" in lines
    same = aorta("compare", str(sweeps["fast"]), str(sweeps["fast"]), "--json", cwd=tmp_path)
    assert json.loads(same.stdout)["differences"] == []
    assert "Same commands, collectors, options and environment." in _before_metrics(aorta(
        "compare", str(sweeps["fast"]), str(sweeps["fast"]), cwd=tmp_path))


def test_a_value_only_an_unpaired_cell_holds_is_no_difference_of_the_runs(tmp_path):
    """A ran X=a, B ran X=a and X=b: the cells that pair ran alike, so no line says the runs set
    X differently (B's X=b cell is unpaired, and the pairing says so)."""
    runs = {}
    for name, values in (("a", "a"), ("b", "a,b")):
        runs[name] = tmp_path / name
        aorta(f"output={runs[name]}", "sweep=repeat", "trials=1", f"+env.X={values}", "--",
              sys.executable, "-c", "pass", cwd=tmp_path)
    done = aorta("compare", str(runs["a"]), str(runs["b"]), "--json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["differences"] == [], result["differences"]
    assert {r["cell"] for r in result["rows"]} == {"env.X=a", "env.X=b"}


def test_runs_with_another_collector_option_say_so_before_any_metric(tmp_path):
    """Two real sweeps of the example rusage collector, max_rss on and off: the option (from the
    trial records) is named before any metric, and nothing else is."""
    need("aorta_rusage")
    runs = {}
    for value in ("true", "false"):
        runs[value] = tmp_path / value
        aorta(f"output={runs[value]}", "sweep=repeat", "trials=1", "collector=rusage",
              f"collector.rusage.max_rss={value}", "--", sys.executable, "-c", "pass",
              cwd=tmp_path)
    done = aorta("compare", str(runs["true"]), str(runs["false"]), "--json", cwd=tmp_path)
    override, diff = json.loads(done.stdout)["differences"]
    assert (override["aspect"], override["key"], override["baseline"],
            override["candidate"]) == ("override", "collector.rusage.max_rss", ["True"], ["False"])
    assert (diff["aspect"], diff["name"], diff["key"], diff["baseline"], diff["candidate"],
            diff["blocks"]) == ("option", "rusage", "max_rss", ["true"], ["false"], False)
    # The option is in every cell's name of each run, yet the cells pair.
    rows = {r["metric"]: r for r in json.loads(done.stdout)["rows"]}
    assert {r["cell"] for r in rows.values()} == {
        "collector.rusage.max_rss=True,collector=rusage → "
        "collector.rusage.max_rss=False,collector=rusage"}
    assert rows["wall_time_s"]["difference"] is not None
    lines = _before_metrics(aorta("compare", str(runs["true"]), str(runs["false"]),
                                  cwd=tmp_path))
    assert ("- the two runs set collector rusage's option max_rss differently: A `true`, "
            "B `false`") in lines
    page = tmp_path / "c.html"
    aorta("compare", str(runs["true"]), str(runs["false"]), "--html", str(page), "--no-png",
          cwd=tmp_path)
    assert "option max_rss differently: A `true`, B `false`" in page.read_text()


def test_bad_arguments_are_one_line_errors(sweeps, tmp_path):
    for args, message in (
        ([str(tmp_path), str(sweeps["fast"])], "no readable matrix.json"),
        ([str(sweeps["fast"]), str(sweeps["slow"]), "--fail-on", "typo_ms:5"],
         f"--fail-on typo_ms: no such metric in either run (metrics: wall_time_s, {STEP})"),
        ([str(sweeps["fast"]), str(sweeps["slow"]), "--fail-on", STEP],
         "expected <metric>:<percent>"),
    ):
        done = aorta("compare", *args, cwd=tmp_path, check=False)
        assert done.returncode == 2 and message in " ".join(done.stderr.split())


def test_usage_mistakes_of_ci_lines_are_one_line_errors_before_any_work(sweeps, tmp_path):
    """What a CI line gets wrong (an empty $AA or $PAGE, a trailing comma, a folder as --html, a
    kernel gate without its name) is exit 2 naming the fix, never a comparison without it."""
    fast, slow = str(sweeps["fast"]), str(sweeps["slow"])
    for extra, message in (
        (["--noise-floor", ""], "--noise-floor '': a run folder is empty"),
        (["--noise-floor", f"{fast},"], f"--noise-floor '{fast},': a run folder is empty"),
        (["--html", ""], "--html '': give the path of the page to write"),
        (["--html", str(tmp_path)], f"--html {tmp_path} is a folder; give the path of the page"),
        (["--fail-on", "kernel:5"], "expected <metric>:<percent> or kernel:<name>:<percent>"),
        (["--noise-floor", f"{sweeps['broken']},{fast}"],
         f"each A/A run needs ≥ 4 passing trials of a metric the compared runs share; "
         f"{sweeps['broken']} has at most 0: rerun it with trials=4 or more"),
    ):
        done = aorta("compare", fast, slow, *extra, cwd=tmp_path, check=False)
        [line] = done.stderr.splitlines()
        assert done.returncode == 2 and done.stdout == "" and message in line, done.stderr


def test_a_run_compared_with_itself_says_so_and_cannot_gate(sweeps, tmp_path):
    fast = str(sweeps["fast"])
    said = f"{fast} and {fast} are the same run: each cell is compared with itself"
    done = aorta("compare", fast, fast, cwd=tmp_path)
    assert done.returncode == 0 and said in done.stderr and said in done.stdout
    gated = aorta("compare", fast, fast, "--fail-on", f"{STEP}:1", cwd=tmp_path, check=False)
    [line] = gated.stderr.splitlines()
    assert gated.returncode == 2 and said in line and "a gate on it would pass" in line
    paired = aorta("compare", fast, fast, "--pair", "default", "default", "--fail-on", f"{STEP}:1",
                   cwd=tmp_path, check=False)
    assert paired.returncode == 2 and "--pair default default sets a cell of" in paired.stderr


def test_html_page(sweeps, tmp_path):
    done = aorta("compare", str(sweeps["fast"]), str(sweeps["slow"]), "--html",
                 str(tmp_path / "c.html"), "--no-png", cwd=tmp_path)
    page = (tmp_path / "c.html").read_text()
    assert done.returncode == 0 and 'id="ratios"' in page and "wall_time_s" in page


@pytest.mark.parametrize(("metric", "higher"), [
    ("workload_samples_per_s", True), ("workload_tflops", True), ("x_gflops", True),
    ("workload_overlap_ratio", True), ("torchprof_overlap_ratio_min", True),
    ("wall_time_s", False), ("workload_step_time_ms", False), ("rocprof_memcpy_bytes", False),
    ("proton_kernel_count", False), ("torchprof_rank_gpu_time_ratio", False)])
def test_direction_of_metrics(metric, higher):
    assert higher_is_better(metric) is higher


def test_marks():
    assert _mark(_moved(1, 1.05, 1.1), False, True, True) == " "
    assert _mark(_moved(1, 1.2, 1.1), False, True, True) == "+"
    assert _mark(_moved(1, 1.2, 1.1), True, True, True) == "-"
    assert _mark(_moved(1, 0.8, 1.1), True, False, False) == "+"  # untested: the factor decides
    assert _mark(_moved(1, 1.2, 1.1), False, True, False) == "~"


@pytest.mark.parametrize(("base", "cand", "moved"), [
    (0, 0, 0), (0, 1e-9, 1), (0, -3, -1),  # any change of a 0 is past every factor
    (-10, -5, 1), (-10, -9.5, 0), (-10, -20, -1), (-9, 5, 1),  # against the magnitude
    (10, -5, -1), (10, 12, 1), (10, 9.5, 0)])
def test_direction_past_the_factor(base, cand, moved):
    assert _moved(base, cand, 1.1) == moved
