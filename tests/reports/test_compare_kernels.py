"""Kernel rows of ``aorta compare`` and of report.html's headline (issue 42), on real sweeps of a
real collector plugin whose ``kernel_table`` returns what its payload measured: per profiled
step, a GEMM, a sort whose work the run scales, 20 small kernels, each with 1 % noise drawn from
a generator seeded by the run and trial (so every run of this test draws the same numbers, and
no two runs draw alike); the payload reports the step time as the sum of its kernels."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from cli_helpers import PluginSite, run_aorta

from aorta_core.reports.significance import min_trials

REPO = Path(__file__).resolve().parents[2]

KTAB = '''
import dataclasses
import json
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl
from aorta_core.api import KernelRow

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    return CollectorInfo(description="kernel table from the payload", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return dataclasses.replace(launch, argv=("env", f"KTAB_DIR={artifact_dir}", *launch.argv))

@hookimpl
def parse_metrics(artifact_dir, options):
    return {}

@hookimpl
def kernel_table(artifact_dir, options):
    rows = json.loads((artifact_dir / "k.json").read_text())
    return [KernelRow(name, 1, ms, "gpu_kernel", step) for name, step, ms in rows]
'''

PAYLOAD = """
import json, os, random
trial = int(os.environ['AORTA_TRIAL'])
rng = random.Random(os.environ.get('SEED', 'a') + str(trial))
kernels = {'gemm': 10.0, 'sort': 5.0 * float(os.environ.get('SCALE', '1')),
           **{f'small_{i}': 0.2 for i in range(20)}}
if os.environ.get('NEW'):
    kernels['fresh_kernel'] = 1.0
rows, total = [], 0.0
for step in (1, 2, 3):
    for name, ms in kernels.items():
        ms *= 1 + rng.gauss(0, 0.01)
        rows.append([name, step, ms])
        total += ms
json.dump(rows, open(os.path.join(os.environ['KTAB_DIR'], 'k.json'), 'w'))
step_ms = total / 3 * (1 + rng.gauss(0, float(os.environ.get('STEP_NOISE', '0'))))
json.dump({'step_time_ms': step_ms}, open(os.environ['AORTA_METRICS_PATH'], 'w'))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, Path]]:
    """base; sort30 (the sort 30 % longer, a new kernel); again (base's command, other noise);
    noisy_step (the sort 30 % longer, the reported step time far noisier than that)."""
    root = tmp_path_factory.mktemp("kernels")
    site = PluginSite(root / "site")
    site.add("ktab", KTAB)

    def sweep(name: str, *overrides: str) -> Path:
        return _sweep(root, site.env, root / name, 6, *overrides)

    return root, site.env, {
        "base": sweep("base"),
        "sort30": sweep("sort30", "+env.SCALE=1.3", "+env.NEW=1", "+env.SEED=b"),
        "again": sweep("again", "+env.SEED=c"),
        # The same change (8 % of the step), but the step time the payload reports varies as
        # much as the step itself, trial to trial.
        "noisy_step": sweep("noisy_step", "+env.SCALE=1.3", "+env.SEED=d",
                            "+env.STEP_NOISE=1"),
    }


def _sweep(root: Path, env: dict[str, str], out: Path, trials: int, *overrides: str) -> Path:
    """A sweep of PAYLOAD under the ktab collector, into ``out``."""
    done = run_aorta(["sweep=repeat", f"trials={trials}", "collector=ktab", f"output={out}",
                      *overrides, "--", sys.executable, "-c", PAYLOAD], root, env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _compare(runs, a: str, b: str, *more: str):
    root, env, out = runs
    done = run_aorta(["compare", str(out[a]), str(out[b]), *more], root, env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_grown_kernel_is_flagged_and_explains_the_step(runs):
    result = json.loads(_compare(runs, "base", "sort30", "--json"))
    rows = {r["name"]: r for r in result["kernels"]}
    assert len(rows) == 23 and {r["collector"] for r in rows.values()} == {"ktab"}
    assert all(r["unit"] == "ms/step" and r["n_baseline"] == r["n_candidate"] == 6
               for r in rows.values())
    sort = rows["sort"]
    assert sort["significant"] and sort["q"] <= 0.05
    assert sort["ci_low_ms"] <= sort["delta_ms"] <= sort["ci_high_ms"]
    assert 1.3 < sort["delta_ms"] < 1.7 and sort["ci_low_ms"] > 1.2  # 30 % of 5 ms
    fresh = rows["fresh_kernel"]  # absent from every baseline trial: 0 ms there
    assert fresh["baseline_ms"] == 0 and fresh["significant"] and 0.9 < fresh["delta_ms"] < 1.1
    assert [n for n, r in rows.items() if r["significant"]] == ["fresh_kernel", "sort"]
    [summary] = result["kernel_summaries"]
    assert summary["reference"] == "workload_step_time_ms"
    assert summary["slower"] == 2 and summary["faster"] == 0
    # The step grew by what the two kernels added, give or take the other kernels' noise.
    assert summary["explained"] == pytest.approx(1.0, abs=0.05)
    low, high = summary["reference_ci_low_ms"], summary["reference_ci_high_ms"]
    assert 0 < low <= summary["reference_delta_ms"] <= high
    # One change alone among 23 rows reaches q <= 0.05 from min_trials(0.05 / 23) a side.
    assert summary["trials_needed"] == min_trials(0.05 / 23) <= summary["trials"] == 6


def test_markdown_leads_with_what_got_slower_sorted_by_ms(runs):
    text = _compare(runs, "base", "sort30")
    kernels, metrics = text.index("## Kernels"), text.index("## Metrics")
    assert kernels < metrics
    section = text[kernels:metrics]
    assert "| slower |" in section and "| faster |" not in section
    assert section.index("`sort`") < section.index("`fresh_kernel`")  # +1.5 before +1.0 ms
    assert "small_" not in section and "% of it" in section
    assert "% across its interval" in section  # the share at both ends of the step's interval


def test_a_step_time_noisier_than_the_change_explains_no_share(runs):
    """The kernel is found all the same; what share of the step it explains is left open."""
    result = json.loads(_compare(runs, "base", "noisy_step", "--json"))
    assert {r["name"] for r in result["kernels"] if r["significant"]} == {"sort"}
    [summary] = result["kernel_summaries"]
    assert summary["reference_ci_low_ms"] <= 0 <= summary["reference_ci_high_ms"]
    text = _compare(runs, "base", "noisy_step")
    assert "its interval holds 0: the step moved less than its own noise" in text
    assert "% of it" not in text


def test_the_same_command_twice_flags_no_kernel(runs):
    result = json.loads(_compare(runs, "base", "again", "--json"))
    assert len(result["kernels"]) == 22
    assert not [r["name"] for r in result["kernels"] if r["significant"]]
    text = _compare(runs, "base", "again")
    assert "0 significantly slower, 0 faster" in text
    assert "% of it" not in text  # no significant row: no share of the step to give


def test_a_noise_floor_of_kernel_rows(runs):
    _, _, out = runs
    result = json.loads(_compare(runs, "base", "sort30", "--json", "--noise-floor",
                                 f"{out['base']},{out['again']}"))
    rows = {r["name"]: r for r in result["kernels"]}
    assert rows["gemm"]["noise_floor"] is not None and rows["gemm"]["noise_floor"] < 0.05
    assert rows["fresh_kernel"]["noise_floor"] is None  # the A/A never ran it
    assert rows["sort"]["significant"] and not result["kernel_notes"]


def test_rows_the_noise_floor_held_back_are_named_in_the_markdown(runs, tmp_path):
    """A row the test found but its floor held back is not in the slower/faster tables: one
    sentence names it with its floor, so --json is not the only place that says why. The A/A
    here is base against a run whose sort is 50 % longer: a floor wider than the sort's +30 %."""
    root, env, out = runs
    wide = _sweep(root, env, tmp_path / "wide", 6, "+env.SCALE=1.5")
    floor = ("--noise-floor", f"{out['base']},{wide}")
    result = json.loads(_compare(runs, "base", "sort30", "--json", *floor))
    held = {r["name"] for r in result["kernels"] if not r["significant"]
            and r["q"] is not None and r["q"] <= 0.05 and r["noise_floor"] is not None}
    assert "sort" in held
    [line] = [ln for ln in _compare(runs, "base", "sort30", *floor).splitlines()
              if ln.startswith("Within their noise floor")]
    assert {name for name in held if f" {name} +" in f" {line}"} == held
    assert "| `sort` |" not in _compare(runs, "base", "sort30", *floor)


def test_a_damaged_table_costs_its_trial_and_says_so(runs, tmp_path):
    import shutil

    _, env, out = runs
    copy = tmp_path / "sort30 copy"
    shutil.copytree(out["sort30"], copy)
    [broken] = sorted(copy.glob("cells/*/trial_002/kernels.parquet"))
    broken.write_bytes(b"not parquet")
    done = run_aorta(["compare", str(out["base"]), str(copy), "--json"], tmp_path, env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    [note] = result["kernel_notes"]
    assert str(broken) in note and "aorta parse" in note and "--kernels" in note
    assert {r["n_candidate"] for r in result["kernels"]} == {5}
    assert {r["name"] for r in result["kernels"] if r["significant"]} == {"sort", "fresh_kernel"}


def test_a_run_without_kernel_tables_is_named_with_the_command_that_writes_them(runs, tmp_path):
    import shutil

    _, env, out = runs
    copy = tmp_path / "no tables"
    shutil.copytree(out["sort30"], copy)
    for table in copy.glob("cells/*/trial_*/kernels.parquet"):
        table.unlink()
    done = run_aorta(["compare", str(out["base"]), str(copy), "--json"], tmp_path, env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["kernels"] == []
    [note] = result["kernel_notes"]
    assert note.startswith(f"{copy}: no passing trial keeps a kernel table")
    assert note.endswith(f"aorta parse {shlex.quote(str(copy))} --kernels")  # to paste
    rebuilt = run_aorta(["parse", str(copy), "--kernels"], tmp_path, env)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    again = json.loads(run_aorta(["compare", str(out["base"]), str(copy), "--json"], tmp_path,
                                 env).stdout)
    assert not again["kernel_notes"]
    assert {r["name"] for r in again["kernels"] if r["significant"]} == {"sort", "fresh_kernel"}


def test_too_few_trials_to_test_any_row_says_how_many_the_rows_need(runs, tmp_path):
    """With 3 trials a side no row is tested: the trials the line asks for are those one change
    among all the cell's rows needs, not the 4 a lone test would."""
    import shutil

    _, env, out = runs
    short = tmp_path / "three trials"
    shutil.copytree(out["sort30"], short)
    for trial in sorted(short.glob("cells/*/trial_*"))[3:]:
        shutil.rmtree(trial)
    assert run_aorta(["matrix", str(short)], tmp_path, env).returncode == 0
    result = json.loads(run_aorta(["compare", str(out["base"]), str(short), "--json"], tmp_path,
                                  env).stdout)
    [summary] = result["kernel_summaries"]
    assert summary["tested"] == 0 and summary["trials"] == 3
    assert summary["trials_needed"] == min_trials(0.05 / summary["rows"]) > 4


def test_the_sweep_headline_names_the_kernels_that_differ_from_the_baseline(runs):
    root, env, _ = runs
    out = root / "two cells"
    done = run_aorta(["-m", "sweep=repeat", "trials=6", "collector=ktab", f"output={out}",
                      "+env.SCALE=1,1.3", "--", sys.executable, "-c", PAYLOAD], root, env,
                     timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (out / "report.html").read_text()
    headline = page[page.index("id=headline"):page.index("</section>",
                                                         page.index("id=headline"))]
    assert "<h3>Kernels</h3>" in headline and "1 significantly slower, 0 faster" in headline
    assert "title='sort'" in headline and "title='gemm'" not in headline


def test_fail_on_gates_kernel_rows_that_are_significantly_slower(runs):
    root, env, out = runs

    def gate(b: str, *rules: str):
        return run_aorta(["compare", str(out["base"]), str(out[b]),
                          *(x if x == "--json" else f"--fail-on={x}" for x in rules)], root, env)

    slower = gate("sort30", "kernel:*:10", "--json")
    assert slower.returncode == 1, slower.stderr[-2000:]
    lines = json.loads(slower.stdout)["failures"]
    assert len(lines) == 2, lines  # the sort (+30 %) and the new kernel, nothing else
    assert any(" ktab kernel sort: +1." in x and "% slower (limit 10%)" in x for x in lines)
    assert any(" ktab kernel fresh_kernel: new in the candidate (0 → " in x for x in lines), lines
    assert slower.stderr.count("aorta: error: --fail-on: ") == 2
    assert gate("sort30", "kernel:gemm:1").returncode == 0  # unchanged: within its noise
    assert gate("sort30", "kernel:sort:40").returncode == 0  # 30 % is within a 40 % limit
    assert gate("again", "kernel:*:0").returncode == 0  # no significant row: the A/A passes
    typo = gate("sort30", "kernel:sotr:5")
    assert typo.returncode == 2 and "no kernel row matches 'sotr' (kernels: " in typo.stderr


def test_a_kernel_gate_with_too_few_trials_to_test_gates_on_the_percentage(runs):
    """At 4 trials a side no row of 23 can reach q ≤ 0.05: the gate fails on the percentage
    alone and says so, never passing because it could not test."""
    root, env, out = runs
    short = _sweep(root, env, root / "short", 4, "+env.SCALE=1.3")
    gate = run_aorta(["compare", str(out["base"]), str(short), "--fail-on=kernel:sort:10",
                      "--json"], root, env)
    assert gate.returncode == 1, gate.stderr[-2000:]
    [line] = json.loads(gate.stdout)["failures"]
    needed = min_trials(0.05 / 22)
    assert line.endswith(f"(limit 10%, inconclusive: q reaches alpha among these rows only "
                         f"from {needed} trials a side)"), line
    assert run_aorta(["compare", str(out["base"]), str(short), "--fail-on=kernel:sort:40"],
                     root, env).returncode == 0  # 30 % is within 40 %, tested or not
