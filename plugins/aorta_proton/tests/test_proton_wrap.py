"""``wrap_argv`` for both attach modes: golden argv, refusals, environment, interpreter checks.

The workload interpreter is either this venv's Python (real Triton 3.6 installed) or a stand-in
``python3`` script in tmp_path that answers the version probe like an interpreter with another
Triton would.
"""

from __future__ import annotations

import os
import stat
import sys
import warnings
from pathlib import Path

import pytest
from aorta_proton import plugin
from aorta_proton.options import ProtonOptions
from needs import needs

from aorta_core import Launch, SetupError

PY = sys.executable
#: Tests whose workload interpreter is this venv's Python, whose Triton the wrap checks.
needs_triton = needs("triton")


def launch(*argv: str, **env: str) -> Launch:
    return Launch(argv=tuple(argv), env={"PATH": os.environ["PATH"], **env}, cwd=Path("/tmp"))


def wrap(launch_: Launch, tmp_path: Path, **options) -> Launch:
    tmp_path.mkdir(parents=True, exist_ok=True)  # the core hands over an existing folder
    return plugin.wrap_argv(launch=launch_, options=ProtonOptions(**options), artifact_dir=tmp_path)


def standin_python(folder: Path, triton: str, runner: bool = True) -> str:
    """An executable named python3 that prints what the probe prints for that Triton.

    The collector caches each interpreter's answer by path for the life of the process, and a
    passing test's tmp_path is deleted and its name reused: name ``folder`` after the answer."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "python3"
    body = f'{{"triton": "{triton}", "aorta_proton": {"true" if runner else "false"}}}'
    path.write_text(f"#!/bin/sh\necho '{body}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


RUN = [PY, "-m", "aorta_proton.cli_runner"]


@needs_triton
def test_default_cli_golden_argv(tmp_path):
    out = wrap(launch(PY, "train.py", "--lr", "0.1"), tmp_path)
    name = str(tmp_path / "proton")
    assert out.argv == (*RUN, "-n", name, "-c", "shadow", "-d", "tree", "train.py", "--lr", "0.1")


@needs_triton
@pytest.mark.parametrize(
    ("options", "flags"),
    [
        ({"backend": "cupti"}, ["-b", "cupti", "-c", "shadow", "-d", "tree"]),
        ({"backend": "instrumentation"}, ["-b", "instrumentation", "-c", "shadow", "-d", "tree"]),
        ({"context": "python", "data": "trace"}, ["-c", "python", "-d", "trace"]),
        ({"hook": "triton"}, ["-c", "shadow", "-d", "tree", "-k", "triton"]),
        (
            {"backend": "cupti", "backend_mode": "pcsampling:interval=500"},
            ["-b", "cupti", "-c", "shadow", "-d", "tree", "-m", "pcsampling:interval=500"],
        ),
        (
            {"backend": "instrumentation", "instrumentation_mode": "mma", "granularity": "warp"},
            ["-b", "instrumentation", "-c", "shadow", "-d", "tree", "-m", "mma:granularity=warp"],
        ),
    ],
)
def test_every_option_renders_its_flag(tmp_path, options, flags):
    out = wrap(launch(PY, "k.py"), tmp_path, **options)
    assert out.argv == (*RUN, "-n", str(tmp_path / "proton"), *flags, "k.py")


@needs_triton
@pytest.mark.parametrize(
    ("argv", "front", "target"),
    [
        ([PY, "-u", "-B", "s.py", "a"], ["-u", "-B"], ["s.py", "a"]),
        ([PY, "-OO", "-X", "dev", "-Wignore", "s.py"], ["-OO", "-X", "dev", "-Wignore"], ["s.py"]),
        ([PY, "-m", "pytest", "-x", "t.py"], [], ["pytest", "-x", "t.py"]),
        ([PY, "-u", "-mpytest", "-q"], ["-u"], ["pytest", "-q"]),
    ],
)
def test_python_shapes_keep_flags_and_normalise_pytest(tmp_path, argv, front, target):
    out = wrap(launch(*argv), tmp_path)
    flags = ["-n", str(tmp_path / "proton"), "-c", "shadow", "-d", "tree"]
    assert out.argv == (PY, *front, "-m", "aorta_proton.cli_runner", *flags, *target)


def test_bare_pytest_uses_its_shebang_interpreter(tmp_path):
    bin_dir = tmp_path / "bin"
    python = standin_python(bin_dir, "3.6.0")
    script = bin_dir / "pytest"
    script.write_text(f"#!{python}\nimport pytest\n")
    script.chmod(0o755)
    out = wrap(Launch(("pytest", "-k", "x"), {"PATH": str(bin_dir)}, Path("/tmp")), tmp_path / "a")
    assert out.argv[0] == python
    assert out.argv[-3:] == ("pytest", "-k", "x")


def test_env_shebang_and_pip_trampoline_are_followed(tmp_path):
    bin_dir = tmp_path / "bin"
    python = standin_python(bin_dir, "3.6.0")
    tool = bin_dir / "torchrun"
    tool.write_text("#!/usr/bin/env python3\n")
    tool.chmod(0o755)
    env = {"PATH": str(bin_dir)}
    out = wrap(Launch(("torchrun", "x.py"), env, Path("/tmp")), tmp_path / "a", mode="env")
    assert out.argv == ("torchrun", "x.py")
    tool.write_text(f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n")
    wrap(Launch(("torchrun", "x.py"), env, Path("/tmp")), tmp_path / "b", mode="env")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([PY, "-m", "torch.distributed.run", "x.py"], r"cannot run `-m torch.distributed.run`"),
        ([PY, "-c", "print(1)"], r"interpreter option '-c'"),
        (["torchrun", "x.py"], r"not 'torchrun'"),
        (["./run.sh"], r"not 'run.sh'"),
        ([PY, "-u"], "names no script"),
        ([PY, "-m"], r"`-m <nothing>`"),
        ([], "command is empty"),
    ],
)
def test_cli_refusals_name_mode_env(tmp_path, argv, match):
    with pytest.raises(SetupError, match=match) as err:
        wrap(launch(*argv), tmp_path)
    message = str(err.value)
    assert "\n" not in message
    if argv and "names no script" not in match:
        assert "mode: env" in message


def test_aorta_proton_python_overrides_the_launch_interpreter(tmp_path):
    python = standin_python(tmp_path / "other", "3.7.1")
    out = wrap(launch("python3", "s.py", AORTA_PROTON_PYTHON=python), tmp_path)
    assert out.argv[:3] == (python, "-m", "aorta_proton.cli_runner")
    assert out.env["AORTA_PROTON_PYTHON"] == python


@needs_triton
def test_env_mode_leaves_argv_and_exports_the_bundle(tmp_path):
    out = wrap(launch("torchrun", "x.py", AORTA_PROTON_PYTHON=PY), tmp_path, mode="env")
    assert out.argv == ("torchrun", "x.py")
    assert {k: v for k, v in out.env.items() if k.startswith("AORTA_PROTON_")} == {
        "AORTA_PROTON_PYTHON": PY,
        "AORTA_PROTON_DIR": str(tmp_path),
        "AORTA_PROTON_NAME": str(tmp_path / "proton"),
        "AORTA_PROTON_CONTEXT": "shadow",
        "AORTA_PROTON_DATA": "tree",
    }


@needs_triton
def test_env_mode_optional_variables_and_stale_ones_dropped(tmp_path):
    stale = launch(PY, "x.py", AORTA_PROTON_BACKEND="roctracer", AORTA_PROTON_MODE="old")
    out = wrap(
        stale, tmp_path, mode="env", backend="instrumentation", granularity="warp", hook="triton"
    )
    assert out.env["AORTA_PROTON_BACKEND"] == "instrumentation"
    assert out.env["AORTA_PROTON_MODE"] == "default:granularity=warp"
    assert out.env["AORTA_PROTON_HOOK"] == "triton"
    auto = wrap(stale, tmp_path / "auto", mode="env")
    assert "AORTA_PROTON_BACKEND" not in auto.env and "AORTA_PROTON_MODE" not in auto.env


BENCHMARK = (PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m",
             "aorta_core.benchmark", "device=cpu")


@needs_triton
def test_auto_takes_env_for_the_built_in_benchmark_cli_for_a_script_and_notes_which(tmp_path):
    bench = wrap(launch(*BENCHMARK), tmp_path / "bench")
    assert bench.argv == BENCHMARK
    assert bench.env["AORTA_PROTON_NAME"] == str(tmp_path / "bench" / "proton")
    assert (tmp_path / "bench" / "attach-mode.txt").read_text() == "env\n"
    script = wrap(launch(PY, "train.py"), tmp_path / "script")
    assert script.argv[:3] == (PY, "-m", "aorta_proton.cli_runner")
    assert "AORTA_PROTON_NAME" not in script.env
    assert (tmp_path / "script" / "attach-mode.txt").read_text() == "cli\n"
    wrap(launch(PY, "train.py"), tmp_path / "given", mode="cli")
    assert not (tmp_path / "given" / "attach-mode.txt").exists()  # the option says it
    for folder, span in (("bench", "iterations"), ("script", "run")):  # on the timeline
        (tmp_path / folder / "proton.chrome_trace").write_text("[]")
        (source,) = plugin.timeline_sources(artifact_dir=tmp_path / folder,
                                            options=ProtonOptions(data="trace"))
        assert source.span == span


@pytest.mark.parametrize("backend", ["roctracer", "rocprofiler"])
def test_auto_refuses_a_pinned_queue_tracer_only_where_it_picks_cli(tmp_path, backend):
    python = standin_python(tmp_path / "py", "3.8.0")
    with pytest.raises(SetupError, match=rf"backend='{backend}' cannot be pinned under mode: cli"):
        wrap(launch(python, "train.py"), tmp_path / "script", backend=backend)
    bench = wrap(launch(python, *BENCHMARK[1:]), tmp_path / "bench", backend=backend)
    assert bench.env["AORTA_PROTON_BACKEND"] == backend


@needs_triton
def test_cli_mode_drops_stale_payload_variables(tmp_path):
    out = wrap(launch(PY, "x.py", AORTA_PROTON_NAME="/old/proton"), tmp_path)
    assert "AORTA_PROTON_NAME" not in out.env


def test_env_mode_needs_a_known_interpreter(tmp_path):
    with pytest.raises(
        SetupError, match=r"cannot tell which Python runs './run.sh'.*AORTA_PROTON_"
    ):
        wrap(launch("./run.sh"), tmp_path, mode="env")


@pytest.mark.parametrize("value", ["1", "true", "ON"])
def test_triton_proton_disable_is_refused(tmp_path, value):
    with pytest.raises(SetupError, match="TRITON_PROTON_DISABLE is set"):
        wrap(launch(PY, "x.py", TRITON_PROTON_DISABLE=value), tmp_path)


@pytest.mark.parametrize(
    ("triton", "options", "match"),
    [
        ("", {}, r"Triton is not installed in the workload interpreter .*pip install triton"),
        ("3.4.0", {}, r"Proton under aorta needs Triton >= 3.5, but .* has triton 3.4.0"),
        ("3.7.1", {"backend": "rocprofiler", "mode": "env"}, r"backend: rocprofiler needs .*3.8"),
        (
            "3.6.0",
            {"backend": "cupti", "backend_mode": "periodic_flushing"},
            r"backend_mode: periodic_flushing with backend: cupti needs Triton >= 3.7",
        ),
        (
            "3.8.0",
            {"backend": "rocprofiler", "backend_mode": "pcsampling", "mode": "env"},
            r"needs Triton >= 3.9",
        ),
        ("nightly", {}, r"cannot read the Triton version 'nightly'"),
    ],
)
def test_triton_version_of_the_workload_interpreter_is_checked(tmp_path, triton, options, match):
    python = standin_python(tmp_path / f"bin-{triton}", triton)
    with pytest.raises(SetupError, match=match):
        wrap(launch(python, "x.py"), tmp_path, **options)


@pytest.mark.parametrize("triton", ["3.5.1", "3.6.0", "3.9.0+git1234"])
def test_supported_tritons_pass(tmp_path, triton):
    python = standin_python(tmp_path / f"bin-{triton}", triton)
    out = wrap(launch(python, "x.py"), tmp_path, backend="cupti", backend_mode="pcsampling")
    assert out.argv[0] == python


def test_cli_needs_the_runner_in_the_workload_interpreter(tmp_path):
    python = standin_python(tmp_path / "bin", "3.6.0", runner=False)
    with pytest.raises(SetupError, match=r"aorta-proton is not installed in .*mode: env"):
        wrap(launch(python, "x.py"), tmp_path)
    assert wrap(launch(python, "x.py"), tmp_path, mode="env").argv == (python, "x.py")


def test_broken_interpreter_is_a_setup_error(tmp_path):
    missing = str(tmp_path / "nope" / "python3")
    with pytest.raises(
        SetupError, match=r"cannot run the workload interpreter .*AORTA_PROTON_PYTHON"
    ):
        wrap(launch(missing, "x.py"), tmp_path)


@needs_triton
def test_real_interpreter_probe_reads_installed_triton():
    from aorta_proton.triton_version import probe

    found = probe(PY, dict(os.environ))
    import importlib.metadata

    assert found.triton == importlib.metadata.version("triton")
    assert found.has_runner


@pytest.mark.parametrize(
    ("options", "env", "expected", "removed"),
    [
        (
            {"mode": "env", "backend": "roctracer"},
            {"HIP_VISIBLE_DEVICES": "1,2"},
            {"ROCR_VISIBLE_DEVICES": "1,2"},
            ["HIP_VISIBLE_DEVICES"],
        ),
        (
            {"mode": "env", "backend": "rocprofiler"},
            {"HIP_VISIBLE_DEVICES": ""},
            {"ROCR_VISIBLE_DEVICES": ""},
            ["HIP_VISIBLE_DEVICES"],
        ),
        (
            {},
            {"HIP_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "5"},
            {"ROCR_VISIBLE_DEVICES": "3"},
            ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"],
        ),
        (
            {},
            {"HIP_VISIBLE_DEVICES": "3", "ROCR_VISIBLE_DEVICES": "0"},
            {"ROCR_VISIBLE_DEVICES": "0"},
            ["HIP_VISIBLE_DEVICES"],
        ),
        (
            {"mode": "env", "backend": "roctracer"},
            {"CUDA_VISIBLE_DEVICES": "2"},
            {"ROCR_VISIBLE_DEVICES": "2"},
            ["CUDA_VISIBLE_DEVICES"],
        ),
    ],
)
def test_amd_queue_tracers_get_rocr_visible_devices(tmp_path, options, env, expected, removed):
    python = standin_python(tmp_path / "bin", "3.9.0")
    with pytest.warns(UserWarning, match="ROCR_VISIBLE_DEVICES"):
        out = wrap(launch(python, "x.py", **env), tmp_path, **options)
    for key, value in expected.items():
        assert out.env[key] == value
    for key in removed:
        assert key not in out.env


@needs_triton
@pytest.mark.parametrize(
    ("options", "env"),
    [
        ({}, {"CUDA_VISIBLE_DEVICES": "1"}),  # auto on a host with no AMD variable: NVIDIA
        ({"backend": "cupti"}, {"CUDA_VISIBLE_DEVICES": "1"}),
        ({"backend": "instrumentation"}, {"HIP_VISIBLE_DEVICES": "1"}),
    ],
)
def test_no_translation_for_cupti_instrumentation_or_nvidia_auto(tmp_path, options, env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = wrap(launch(PY, "x.py", **env), tmp_path, **options)
    for key, value in env.items():
        assert out.env[key] == value
    assert "ROCR_VISIBLE_DEVICES" not in out.env


@needs_triton
def test_wrap_returns_a_new_launch_and_keeps_cwd(tmp_path):
    original = launch(PY, "x.py", HIP_VISIBLE_DEVICES="0")
    with pytest.warns(UserWarning):
        out = wrap(original, tmp_path)
    assert original.env["HIP_VISIBLE_DEVICES"] == "0" and original.argv == (PY, "x.py")
    assert out.cwd == original.cwd
