"""Argv goldens for every option and the binary resolution of ``wrap_argv``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from aorta_rocprof import plugin
from aorta_rocprof.options import RocprofOptions

from aorta_core import Launch, SetupError

STANDIN = Path(__file__).parent / "standin" / "rocprofv3"
OUT = Path("/art/rocprof")


def launch(env: dict[str, str], argv=("python", "train.py", "--lr=0.1"), cwd=Path("/")) -> Launch:
    return Launch(argv=tuple(argv), env=env, cwd=cwd)


def wrapped(opts: RocprofOptions, **kw) -> list[str]:
    result = plugin.wrap_argv(launch({"ROCPROF_BIN": str(STANDIN)}, **kw), opts, OUT)
    return list(result.argv)


BASE = [str(STANDIN), "-d", str(OUT), "-o", "aorta", "--output-format", "csv"]
TAIL = ["--", "python", "train.py", "--lr=0.1"]


def test_default_argv():
    assert wrapped(RocprofOptions()) == [
        *BASE, "--kernel-trace", "--stats", "-S", "--summary-output-file", "rocprof_summary", *TAIL
    ]


def test_stats_off_omits_flag():
    argv = wrapped(RocprofOptions(stats=False))
    assert "--stats" not in argv
    assert argv[len(BASE):len(BASE) + 4] == ["--kernel-trace", "-S", "--summary-output-file",
                                            "rocprof_summary"]


def test_every_trace_domain_in_order_deduplicated():
    opts = RocprofOptions(trace=["kernel", "hip", "hip_runtime", "memory_copy", "rccl", "marker",
                                 "scratch", "kernel"])
    assert wrapped(opts)[len(BASE):len(BASE) + 7] == [
        "--kernel-trace", "--hip-trace", "--hip-runtime-trace", "--memory-copy-trace",
        "--rccl-trace", "--marker-trace", "--scratch-memory-trace",
    ]


@pytest.mark.parametrize("fmt", ["json", "pftrace", "otf2", "rocpd"])
def test_output_format(fmt):
    assert wrapped(RocprofOptions(output_format=fmt))[5:7] == ["--output-format", fmt]


def test_all_optional_flags_in_fixed_order(tmp_path):
    counters = tmp_path / "counters.yaml"
    counters.write_text("jobs:\n  - pmc: [SQ_WAVES]\n")
    opts = RocprofOptions(summary_units="msec", kernel_include_regex="gemm|attn",
                          input_file="counters.yaml", pmc=["SQ_WAVES", "GRBM_COUNT"])
    assert wrapped(opts, cwd=tmp_path) == [
        *BASE, "--kernel-trace", "--stats", "-S", "--summary-output-file", "rocprof_summary",
        "-u", "msec", "--kernel-include-regex", "gemm|attn", "-i", str(counters),
        "--pmc", "SQ_WAVES", "GRBM_COUNT", *TAIL,
    ]


def test_pmc_is_last_before_separator():
    argv = wrapped(RocprofOptions(pmc=["SQ_WAVES"]))
    assert argv[argv.index("--") - 2:argv.index("--")] == ["--pmc", "SQ_WAVES"]


def test_command_passed_byte_for_byte_after_separator():
    argv = ("./app", "--kernel-trace", "a b", "x=1,2", "--")
    assert wrapped(RocprofOptions(), argv=argv)[-6:] == ["--", *argv]


def test_launch_not_mutated_and_env_cwd_kept(tmp_path):
    original = launch({"ROCPROF_BIN": str(STANDIN), "X": "1"}, cwd=tmp_path)
    result = plugin.wrap_argv(original, RocprofOptions(), OUT)
    assert original.argv == ("python", "train.py", "--lr=0.1")
    assert result.env == original.env and result.cwd == tmp_path


def test_missing_input_file_is_setup_error(tmp_path):
    with pytest.raises(SetupError, match=r"input_file=nope\.yaml does not exist"):
        wrapped(RocprofOptions(input_file="nope.yaml"), cwd=tmp_path)


def test_empty_command_is_setup_error():
    with pytest.raises(SetupError, match="no command"):
        wrapped(RocprofOptions(), argv=())


def _exe(folder: Path, name: str = "rocprofv3", mode: int = 0o755) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_rocprofv3_found_on_path(tmp_path):
    exe = _exe(tmp_path)
    result = plugin.wrap_argv(launch({"PATH": str(tmp_path)}), RocprofOptions(), OUT)
    assert result.argv[0] == str(exe)


def test_rocprof_bin_name_looked_up_on_path(tmp_path):
    exe = _exe(tmp_path, "rocprofv3-7.0")
    env = {"PATH": str(tmp_path), "ROCPROF_BIN": "rocprofv3-7.0"}
    assert plugin.wrap_argv(launch(env), RocprofOptions(), OUT).argv[0] == str(exe)


def test_rocprof_bin_user_expanded(tmp_path, monkeypatch):
    exe = _exe(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"PATH": "", "ROCPROF_BIN": "~/rocprofv3"}
    assert plugin.wrap_argv(launch(env), RocprofOptions(), OUT).argv[0] == str(exe)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PATH": ""},
         "rocprofv3 is not on PATH; install ROCm's rocprofiler-sdk or set ROCPROF_BIN"),
        ({"PATH": "", "ROCPROF_BIN": "/no/such/rocprofv3"},
         "ROCPROF_BIN=/no/such/rocprofv3 is not an executable file"),
        ({"PATH": "", "ROCPROF_BIN": "rocprofv3"}, "ROCPROF_BIN=rocprofv3 is not found on PATH"),
    ],
)
def test_missing_binary_names_rocprof_bin(env, message):
    with pytest.raises(SetupError, match="ROCPROF_BIN") as info:
        plugin.wrap_argv(launch(env), RocprofOptions(), OUT)
    assert message in str(info.value)


def test_non_executable_override_refused(tmp_path):
    exe = _exe(tmp_path, mode=stat.S_IRUSR | stat.S_IWUSR)
    assert not os.access(exe, os.X_OK)
    with pytest.raises(SetupError, match="is not an executable file"):
        plugin.wrap_argv(launch({"ROCPROF_BIN": str(exe)}), RocprofOptions(), OUT)

