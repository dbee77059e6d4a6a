"""The collector through the real ``aorta`` command line (Hydra sweep, records, matrix, parse)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import NO_GPU, needs

FIXTURES = Path(__file__).parent / "fixtures"
#: Past the check that refuses Proton on a machine without a GPU: the tests of what a trial does
#: there (Proton's own failure, the variables env mode exports) run on any machine.
UNCHECKED = {"AORTA_PROTON_GPU_CHECK": "0"}


def aorta(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aorta_core", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


def only_record(output: Path) -> dict:
    (path,) = output.glob("cells/*/trial_000/record.json")
    return json.loads(path.read_text())


def test_bad_option_fails_at_compose_time_and_runs_nothing(tmp_path):
    done = aorta("sweep=repeat", "collector=proton", "trials=1", f"output={tmp_path / 'o'}",
                 "collector.proton.backend=cupti_pcsampling", "--", sys.executable, "-c", "pass",
                 cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "collector.proton.backend: 'cupti_pcsampling' is not one of" in done.stdout + done.stderr
    assert not list((tmp_path / "o").glob("cells/*/trial_*/record.json"))


def test_unknown_option_key_is_rejected_by_the_schema(tmp_path):
    done = aorta("sweep=repeat", "collector=proton", "trials=1", f"output={tmp_path / 'o'}",
                 "collector.proton.backned=cupti", "--", sys.executable, "-c", "pass",
                 cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == ("aorta: error: collector.proton.backned is not a setting; did you mean "
                           "`collector.proton.backend`?\n")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("recipe", [["sweep=repeat", "trials=1"], []], ids=["script", "benchmark"])
def test_a_machine_without_a_gpu_is_refused_in_one_line_before_anything_runs(tmp_path, recipe):
    """Proton fails every trial where Triton finds no GPU ("0 active drivers"): the sweep says so
    before it starts (NO_GPU hides a GPU host's GPUs), for a script and the built-in benchmark."""
    ran = tmp_path / "ran"
    script = tmp_path / "payload.py"
    script.write_text(f"open({str(ran)!r}, 'w')\n")
    command = ["--", sys.executable, str(script)] if recipe else []
    done = aorta(*recipe, "collector=proton", f"output={tmp_path / 'o'}", *command,
                 cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("aorta: error: collector proton cannot measure on this machine: ")
    assert "every trial would fail with '0 active drivers'" in line
    assert not (tmp_path / "o").exists() and not ran.exists()


@needs("hydra_plugins.hydra_submitit_launcher")
def test_cells_sent_to_cluster_nodes_are_not_refused_for_the_machine_that_plans_them(tmp_path):
    """With Slurm the cells run on its nodes, not here: no refusal on this machine's GPU
    (``--cfg job`` prints the cell's config and submits nothing)."""
    done = aorta("sweep=repeat", "collector=proton", "hydra/launcher=aorta_slurm",
                 f"output={tmp_path / 'o'}", "--cfg", "job", "--", sys.executable, "x.py",
                 cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    assert "proton:" in done.stdout and "cannot measure" not in done.stderr


@needs("triton")
def test_cli_mode_runs_the_runner_and_cpu_only_triton_fails_the_trial(tmp_path):
    """``mode: auto`` runs a plain script under Proton's command line (cli)."""
    script = tmp_path / "payload.py"
    script.write_text("print('payload ran')\n")
    out = tmp_path / "o"
    aorta("sweep=repeat", "collector=proton", "trials=1", f"output={out}",
          "collector.proton.backend=cupti", "--", sys.executable, "-u", str(script), "--x", "1",
          cwd=tmp_path, env=UNCHECKED)  # fmt: skip
    record = only_record(out)
    artifact = Path(record["metrics"]["proton_artifact_dir"])
    assert record["argv_run"] == [
        sys.executable, "-u", "-m", "aorta_proton.cli_runner", "-n", str(artifact / "proton"),
        "-b", "cupti", "-c", "shadow", "-d", "tree", str(script), "--x", "1",
    ]  # fmt: skip
    if record["verdict"] == "pass":  # a machine whose Triton sees a GPU
        return
    assert record["verdict"] == "fail" and record["exit_code"] == 1
    assert "RuntimeError" in record["error"]  # Proton cannot start without a GPU
    assert any("no profile written" in w for w in record["warnings"]["proton"])


def test_unwrappable_launch_is_a_setup_error_naming_mode_env(tmp_path):
    out = tmp_path / "o"
    aorta("sweep=repeat", "collector=proton", "trials=1", f"output={out}",
          "--", sys.executable, "-c", "print(1)", cwd=tmp_path, env=UNCHECKED)  # fmt: skip
    record = only_record(out)
    assert record["verdict"] == "error"
    assert record["error"].startswith(
        "proton: collector proton (mode: auto, cli for anything but the built-in benchmark) "
        "cannot keep the interpreter option '-c'")
    assert "mode: env" in record["error"]


@needs("triton")
def test_env_mode_exports_the_variables_and_leaves_argv(tmp_path):
    script = tmp_path / "payload.py"
    script.write_text(
        "import os\nprint(sorted((k, v) for k, v in os.environ.items() if k.startswith("
        "'AORTA_PROTON_') and k not in ('AORTA_PROTON_PYTHON', 'AORTA_PROTON_GPU_CHECK')))\n"
    )
    out = tmp_path / "o"
    aorta("sweep=repeat", "collector=proton", "trials=1", f"output={out}",
          "collector.proton.mode=env", "collector.proton.backend=instrumentation",
          "--", sys.executable, str(script), cwd=tmp_path, env=UNCHECKED)  # fmt: skip
    record = only_record(out)
    assert record["verdict"] == "pass"
    assert record["argv_run"] == [sys.executable, str(script)]
    trial = next(out.glob("cells/*/trial_000"))
    artifact = record["metrics"]["proton_artifact_dir"]
    stdout = (trial / record["stdout"]).read_text()
    assert str([("AORTA_PROTON_BACKEND", "instrumentation"), ("AORTA_PROTON_CONTEXT", "shadow"),
                ("AORTA_PROTON_DATA", "tree"), ("AORTA_PROTON_DIR", artifact),
                ("AORTA_PROTON_NAME", f"{artifact}/proton")]) in stdout  # fmt: skip
    assert any("aorta_proton.payload.start()" in w for w in record["warnings"]["proton"])


def test_aorta_parse_prints_the_metrics_of_a_real_capture(tmp_path):
    folder = tmp_path / "proton"
    folder.mkdir()
    shutil.copy(FIXTURES / "roctracer_add_mi300.hatchet", folder / "proton.hatchet")
    done = aorta("parse", "proton", str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "proton_kernel_count": 1,
        "proton_gpu_time_ms": 0.003925,
        "proton_top_kernel_ms": 0.003925,
        "proton_top_kernels": ["add_kernel"],
        "proton_artifact_dir": str(folder.resolve()),
    }
