"""``aorta sweep run --recipe R.yaml -- <command>``: upstream's probe recipes on aorta's engine.

Hardware: none. Every command is a small Python payload on the CPU (torchprof profiles it with
its CPU activity), so each test means the same on a CPU-only machine and on a GPU host.
"""

from __future__ import annotations

import json
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import pytest
from cli_helpers import records, run_aorta

REPO = Path(__file__).resolve().parents[1]
HEAD = """\
schema_version: 1
mode: probe
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""
#: Prints the variables the two axes set, so a trial's stdout shows its cell's environment.
SHOW_ENV = ("import os; print(os.environ.get('DISABLE_TF32'), "
            "os.environ.get('HIP_LAUNCH_BLOCKING'))")
TRAIN = """\
import torch
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(8):
    opt.zero_grad()
    model(torch.randn(16, 32)).sum().backward()
    opt.step()
"""


def _recipe(folder: Path, text: str, name: str = "recipe.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def _sweep_run(folder: Path, *args: str, timeout: float = 120):
    return run_aorta(["sweep", "run", *args], cwd=folder, timeout=timeout)


def _one_error(done) -> str:
    """The single line a refused command prints (a broken plugin's warning may precede it)."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("aorta: warning:")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("aorta: error: "), done.stderr
    return lines[0]


def test_two_axis_values_run_two_cells_with_their_environment_and_resume(tmp_path: Path):
    recipe = _recipe(tmp_path, """\
        schema_version: 1
        mode: probe
        ticket: PERF-1
        trials: 2
        mitigation_axis: [none, tf32_off]
        diagnostic_axis: [hip_launch_blocking]
        timeout_per_trial: 120
        """)
    argv = ["--recipe", str(recipe), "--output", "runs", "--", sys.executable, "-c", SHOW_ENV]
    first = _sweep_run(tmp_path, "--trials", "1", *argv)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "runs" / "PERF-1"
    once = {(r["cell"], r["trial"]): r["started_at_unix"] for r in records(out)}
    assert len(once) == 2  # --trials 1 replaced the recipe's 2

    again = _sweep_run(tmp_path, *argv)  # the recipe's trials: 2; trial 0 of each cell is kept
    assert again.returncode == 0, again.stderr
    recs = records(out)
    assert [(r["axes"], r["trial"]) for r in recs] == [
        ({"diagnostic": "hip_launch_blocking", "mitigation": "none"}, 0),
        ({"diagnostic": "hip_launch_blocking", "mitigation": "none"}, 1),
        ({"diagnostic": "hip_launch_blocking", "mitigation": "tf32_off"}, 0),
        ({"diagnostic": "hip_launch_blocking", "mitigation": "tf32_off"}, 1),
    ]
    for rec in recs:
        assert rec["verdict"] == "pass"
        if rec["trial"] == 0:
            assert rec["started_at_unix"] == once[(rec["cell"], 0)]  # resumed, not re-run
        tf32 = "1" if rec["axes"]["mitigation"] == "tf32_off" else None
        assert rec["cell_env"] == {"HIP_LAUNCH_BLOCKING": "1",
                                   **({"DISABLE_TF32": tf32} if tf32 else {})}
        stdout = out / "cells" / rec["cell"] / f"trial_{rec['trial']:03d}" / "stdout.log"
        assert stdout.read_text().split() == [str(tf32), "1"]
    matrix = json.loads((out / "matrix.json").read_text())
    assert sorted(c["axes"]["mitigation"] for c in matrix["cells"]) == ["none", "tf32_off"]
    assert all(c["trials"] == {"total": 2, "pass": 2, "fail": 0, "error": 0}
               for c in matrix["cells"])
    assert (out / "perf.md").is_file() and (out / "report.html").is_file()


def test_collect_flag_adds_torchprof_artifacts_and_metrics(tmp_path: Path):
    (tmp_path / "train.py").write_text(TRAIN)
    recipe = _recipe(tmp_path, HEAD)
    done = _sweep_run(tmp_path, "--recipe", str(recipe), "--collect", "torchprof",
                      "--output", "runs", "--", sys.executable, "train.py", timeout=300)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "runs" / "_no_ticket_"
    (rec,) = records(out)
    assert rec["collectors"] and list(rec["collectors"]) == ["torchprof"]
    assert rec["metrics"]["torchprof_cpu_op_count"] > 0
    trial = out / "cells" / rec["cell"] / "trial_000"
    assert list((trial / "torchprof").glob("*.pt.trace.json"))
    (cell,) = json.loads((out / "matrix.json").read_text())["cells"]
    assert cell["metrics_summary"]["torchprof_cpu_op_ms"]["n"] == 1


def test_recipe_collect_becomes_collector_overrides_and_the_flag_replaces_the_list(
        tmp_path: Path):
    recipe = _recipe(tmp_path, HEAD + textwrap.dedent("""\
        collect:
          torchprof: {step_on: run, activities: "cpu"}
          rocprof: {trace: "kernel, hip", kernel_include_regex: "^gemm(a|b)$"}
        retain: {on_pass: summary}
        """))
    base = ["--recipe", str(recipe), "--dry-run", "--", "python", "train.py"]
    done = _sweep_run(tmp_path, *base)
    assert done.returncode == 0, done.stderr
    assert ("'collector=[torchprof,rocprof]' collector.torchprof.step_on=run "
            "'collector.torchprof.activities=[cpu]' 'collector.rocprof.trace=[kernel,hip]' "
            "'collector.rocprof.kernel_include_regex='\"'\"'^gemm(a|b)$'\"'\"''") in done.stdout
    assert "retain.on_pass=summary" in done.stdout and "timeout=null" in done.stdout
    kept = _sweep_run(tmp_path, "--collect", "torchprof", *base)
    assert kept.returncode == 0, kept.stderr
    assert "collector=torchprof collector.torchprof.step_on=run" in kept.stdout
    assert "rocprof" not in kept.stdout
    assert not (tmp_path / "probe_results").exists()  # a dry run writes nothing


def test_the_examples_load(tmp_path: Path):
    for recipe in sorted((REPO / "examples" / "upstream").glob("*.yaml")):
        done = _sweep_run(tmp_path, "--recipe", str(recipe), "--dry-run", "--", "true")
        assert done.returncode == 0, f"{recipe.name}: {done.stderr}"
        assert "mitigation=none diagnostic=none" in done.stdout


BAD = {
    "unknown key": (HEAD + "trails: 2\n", [], "trails is not a key of an upstream probe recipe; "
                                             "did you mean trials?"),
    "wrong type": (HEAD.replace("trials: 1", "trials: '2'"), [],
                   "trials: expected int, got str"),
    "bool for an int": (HEAD.replace("trials: 1", "trials: true"), [],
                        "trials: expected int, got bool"),
    "schema_version 2": (HEAD.replace("schema_version: 1", "schema_version: 2"), [],
                         "schema_version: 2 is not supported; this aorta reads "
                         "schema_version: 1"),
    "mode triage": (HEAD.replace("mode: probe", "mode: triage"), [],
                    "mode: triage (upstream's registered workloads x environments) has no "
                    "counterpart in aorta"),
    "mode missing": (HEAD.replace("mode: probe\n", ""), [], "mode is missing"),
    "uninstalled collector": (HEAD + "collect: [nsys]\n", [],
                              "collect: nsys is not an installed collector"),
    "upstream-only collector": (HEAD, ["--collect", "numerics"],
                                "--collect: numerics: upstream's numerics checks have no aorta "
                                "collector"),
    "unknown collector option": (HEAD + "collect:\n  torchprof: {step_onn: run}\n", [],
                                 "collect.torchprof.step_onn is not an option of torchprof; "
                                 "valid: "),
    "option not a string": (HEAD + "collect:\n  torchprof: {record_shapes: true}\n", [],
                            "collect.torchprof.record_shapes: option values are strings"),
    "bad option value": (HEAD + "collect:\n  torchprof: {step_on: never}\n", [],
                         "recipe.yaml: collector.torchprof.step_on='never' is not valid"),
    "option of the wrong type": (HEAD + "collect:\n  torchprof: {wait: soon}\n", [],
                                 "collect.torchprof.wait: Value 'soon' of type 'str' could not "
                                 "be converted to Integer"),
    "unknown mitigation": (HEAD.replace("[none]\ndiag", "[tf32off]\ndiag"), [],
                           "mitigation_axis[0]: 'tf32off' is not one of upstream's built-in "
                           "mitigations (did you mean tf32_off?"),
    "no counterpart": (HEAD + "hang_window_sec: 30\n", [],
                       "hang_window_sec: there is no hang detector"),
    "bad retain level": (HEAD + "retain: {on_pass: some}\n", [],
                         "retain.on_pass: 'some' is not allowed; use one of full, summary, "
                         "log, none"),
    "yaml syntax": (HEAD + "collect: [torchprof\n", [], "not valid YAML (line 7"),
    "triage key": (HEAD + "steps: 10\n", [], "steps: triage-mode keys"),
    "refused flag": (HEAD, ["--mitigations-file", "m.json"], "--mitigations-file: only "
                                                             "upstream's built-in"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_recipe_aorta_cannot_honour_is_one_line_and_exit_2(tmp_path: Path, case: str):
    text, flags, expected = BAD[case]
    recipe = _recipe(tmp_path, text)
    done = _sweep_run(tmp_path, "--recipe", str(recipe), *flags, "--", "true")
    assert done.returncode == 2, done.stderr
    assert expected in _one_error(done)
    assert not (tmp_path / "probe_results").exists()


@pytest.mark.skipif(not all(map(find_spec, ("aorta_rocprof", "aorta_proton"))),
                    reason="needs aorta_rocprof and aorta_proton: pip install -e "
                           "plugins/aorta_rocprof -e plugins/aorta_proton")
def test_collectors_that_conflict_are_refused_at_load_as_upstream_does(tmp_path: Path):
    """rocprof with proton's default backend (auto: queue-intercepting on AMD) is refused before
    anything runs; with backend instrumentation the two nest."""
    recipe = _recipe(tmp_path, HEAD + "collect:\n  proton: {backend: instrumentation}\n")
    done = _sweep_run(tmp_path, "--recipe", str(recipe), "--collect", "rocprof,proton",
                      "--dry-run", "--", "python", "train.py")
    assert done.returncode == 0, done.stderr
    assert "'collector=[rocprof,proton]' collector.proton.backend=instrumentation" in done.stdout
    plain = _recipe(tmp_path, HEAD, "plain.yaml")
    refused = _sweep_run(tmp_path, "--recipe", str(plain), "--collect", "rocprof,proton",
                         "--", "python", "train.py")
    assert refused.returncode == 2
    assert ("--collect: collector rocprof cannot share a trial with proton: rocprof: rocprofv3 "
            "intercepts the HSA queues") in _one_error(refused)
    assert "proton: backend 'auto' intercepts them" in _one_error(refused)
    assert not (tmp_path / "probe_results").exists()


def test_a_missing_recipe_and_a_missing_command_are_one_line_and_exit_2(tmp_path: Path):
    missing = _sweep_run(tmp_path, "--recipe", "nope.yaml", "--", "true")
    assert missing.returncode == 2
    assert "--recipe nope.yaml: no such file" in _one_error(missing)
    recipe = _recipe(tmp_path, HEAD)
    bare = _sweep_run(tmp_path, "--recipe", str(recipe))
    assert bare.returncode == 2
    assert "a probe recipe runs a user command: put it after --" in _one_error(bare)


def test_a_json_recipe_is_read_as_json_and_a_command_needs_the_separator(tmp_path: Path):
    data = {"schema_version": 1, "mode": "probe", "trials": 1, "mitigation_axis": ["xnack"],
            "diagnostic_axis": ["none"]}
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(data))
    done = _sweep_run(tmp_path, "--recipe", str(recipe), "--dry-run", "--", "true")
    assert done.returncode == 0, done.stderr
    assert "mitigation=xnack diagnostic=none: HSA_XNACK=1" in done.stdout
    recipe.write_text(json.dumps({**data, "trials": 1.5}))
    bad = _sweep_run(tmp_path, "--recipe", str(recipe), "--", "true")
    assert bad.returncode == 2 and "trials: expected int, got float" in _one_error(bad)
    bare = _sweep_run(tmp_path, "--recipe", str(recipe), "python", "train.py")
    assert bare.returncode == 2
    assert "'python' is not an option; put your command after --" in _one_error(bare)


def test_help_names_the_command(tmp_path: Path):
    done = run_aorta(["sweep", "run", "--help"], cwd=tmp_path)
    assert done.returncode == 0 and "--recipe" in done.stdout and "--collect" in done.stdout
    usage = run_aorta(["--help"], cwd=tmp_path)
    assert "aorta sweep run --recipe R.yaml" in usage.stdout
