"""Launch rewriting, option checks and real runs of the runner (CPU, gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from aorta_torchprof import plugin
from aorta_torchprof.options import TorchprofOptions
from aorta_torchprof.parse import parse_dir
from aorta_torchprof.wrap import RUNNER

from aorta_core import Launch, OptionError, SetupError

REPO = Path(__file__).resolve().parents[3]
TRAIN = REPO / "examples" / "profiling" / "torchprof" / "train_tiny.py"
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}


def _wrap(argv: list[str], tmp_path: Path, **opts) -> Launch:
    tmp_path.mkdir(parents=True, exist_ok=True)  # the core hands over an existing folder
    launch = Launch(tuple(argv), _env(), tmp_path)
    return plugin.wrap_argv(launch=launch, options=TorchprofOptions(**opts), artifact_dir=tmp_path)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python", "-u", "t.py", "--x"], ["python", "-u", "-m", RUNNER, "t.py", "--x"]),
        (
            ["python", "-X", "dev", "-m", "pkg", "a"],
            ["python", "-X", "dev", "-m", RUNNER, "-m", "pkg", "a"],
        ),
        (
            ["torchrun", "--nproc-per-node", "2", "--standalone", "t.py", "a"],
            ["torchrun", "--nproc-per-node", "2", "--standalone", "-m", RUNNER, "t.py", "a"],
        ),
        (
            ["torchrun", "--nproc_per_node=2", "-m", "pkg.train", "a"],
            ["torchrun", "--nproc_per_node=2", "-m", RUNNER, "-m", "pkg.train", "a"],
        ),
        (
            ["python", "-m", "torch.distributed.run", "--nnodes", "1", "t.py"],
            ["python", "-m", "torch.distributed.run", "--nnodes", "1", "-m", RUNNER, "t.py"],
        ),
    ],
)
def test_wrap_shapes(tmp_path: Path, argv: list[str], expected: list[str]) -> None:
    launch = _wrap(argv, tmp_path)
    assert list(launch.argv) == expected
    assert launch.env["AORTA_TORCHPROF_DIR"] == str(tmp_path)
    assert json.loads(launch.env["AORTA_TORCHPROF_OPTIONS"])["active"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bash", "run.sh"], "cannot wrap 'bash'"),
        (["python", "-c", "print(1)"], "cannot wrap `python -c`"),
        (["torchrun", "--no-python", "./a.out"], "--no-python"),
        (["python", "-m", "torch.distributed.launch", "t.py"], "torch.distributed.launch"),
        (["torchrun", "--nnodes", "1"], "names no training script"),
    ],
)
def test_unwrappable_launches(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(SetupError, match=message.replace("(", r"\(")):
        _wrap(argv, tmp_path)


def test_env_mode_leaves_argv(tmp_path: Path) -> None:
    launch = _wrap(["bash", "bench.sh"], tmp_path, mode="env", wait=0)
    assert launch.argv == ("bash", "bench.sh")
    assert json.loads(launch.env["AORTA_TORCHPROF_OPTIONS"])["wait"] == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "cli"}, "mode='cli' is not valid; use one of: wrap, env"),
        ({"step_on": "epoch"}, "step_on='epoch'"),
        ({"activities": ["tpu"]}, "activities='tpu'"),
        ({"active": 0}, "active=0"),
        ({"wait": -1}, "wait=-1"),
        ({"chrome_trace": False}, "nothing would be written"),
    ],
)
def test_check_options(change: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        plugin.check_options(options=replace(TorchprofOptions(), **change), selected={})
    plugin.check_options(options=TorchprofOptions(), selected={})


def _run(launch: Launch) -> subprocess.CompletedProcess:
    return subprocess.run(
        launch.argv,
        env=dict(launch.env),
        cwd=launch.cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runner_keeps_exit_code_and_writes_trace(tmp_path: Path) -> None:
    launch = _wrap(
        [sys.executable, str(TRAIN), "--steps", "6", "--width", "32", "--exit-code", "3",
         "--device", "cpu"],
        tmp_path,
        key_averages=True,
        gzip=True,
    )
    done = _run(launch)
    assert done.returncode == 3, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rank0.key_averages.txt",
        "rank0.step-on.txt",  # step_on=auto: what it followed
        "rank0.step5.pt.trace.json.gz",
    ]
    metrics = parse_dir(tmp_path)
    assert metrics["torchprof_cpu_op_count"] > 0 and metrics["torchprof_step_on"] == "optimizer"


def test_runner_exception_exits_1_with_traceback(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text(
        "import sys\nassert sys.argv[1:] == ['a b'], sys.argv\nraise RuntimeError('boom')\n"
    )
    out = tmp_path / "out"
    done = _run(_wrap([sys.executable, str(script), "a b"], out, step_on="run"))
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr
    assert [p.name for p in out.iterdir()] == ["rank0.pt.trace.json"]


def test_a_payload_that_ends_without_teardown_still_gets_its_trace(tmp_path: Path) -> None:
    """The built-in benchmark ends with ``exit_without_teardown``; under the runner that must
    end the payload, not the process, or the runner's profiler would never write its trace."""
    script = tmp_path / "ends.py"
    script.write_text("import torch\nfrom aorta_core.api import exit_without_teardown\n"
                      "torch.ones(8).sum()\nexit_without_teardown(4)\n")
    out = tmp_path / "out"
    done = _run(_wrap([sys.executable, str(script)], out, step_on="run"))
    assert done.returncode == 4, done.stderr
    assert [p.name for p in out.iterdir()] == ["rank0.pt.trace.json"]


def test_manual_step_and_short_schedule_warning(tmp_path: Path) -> None:
    script = tmp_path / "manual.py"
    script.write_text(
        "import torch\nfrom aorta_torchprof.session import step\n"
        "for _ in range(4):\n    torch.ones(8).sum()\n    step()\n"
    )
    done = _run(
        _wrap([sys.executable, str(script)], tmp_path / "m", step_on="manual", wait=0, active=2)
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "m").iterdir()] == [
        "rank0.step3.pt.trace.json"
    ]  # warmup 1 + active 2
    done = _run(_wrap([sys.executable, str(script)], tmp_path / "o", wait=5, step_on="optimizer"))
    assert "wrote no trace" in done.stderr
    # the parser says why in the record's warnings, not only in the trial's stderr
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert parse_dir(tmp_path / "o") == {}
    assert [str(w.message) for w in caught] == [
        f"torchprof: no Kineto trace (*.json, *.json.gz) in {tmp_path / 'o'}: rank 0 wrote no "
        "trace: the schedule never reached an active step (0 steps seen with "
        "step_on=optimizer); set collector.torchprof.step_on=run or lower "
        "wait/warmup/skip_first"]


def test_torchrun_gloo_every_rank_profiled(tmp_path: Path) -> None:
    argv = [
        "torchrun",
        "--nproc-per-node",
        "2",
        "--standalone",
        str(TRAIN),
        "--steps",
        "5",
        "--width",
        "32",
        "--device",
        "cpu",
    ]
    done = _run(_wrap(argv, tmp_path, active=2))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rank0.step-on.txt",
        "rank0.step4.pt.trace.json",
        "rank1.step-on.txt",
        "rank1.step4.pt.trace.json",
    ]
    metrics = parse_dir(tmp_path)
    assert metrics["torchprof_rank_count"] == 2
    # step_on=auto in a distributed launch: the optimizer's steps from the start, as before
    assert metrics["torchprof_step_on"] == "optimizer"
    assert "c10d::allreduce_" in metrics["torchprof_top_cpu_ops"]
