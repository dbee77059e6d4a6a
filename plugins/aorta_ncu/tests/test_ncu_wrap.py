"""Argv goldens for every option, the binary lookup, and the host checks of ``wrap_argv``."""

from __future__ import annotations

from pathlib import Path

import pytest
from aorta_ncu import plugin
from aorta_ncu.counters import REQUESTED
from aorta_ncu.host import check_host
from aorta_ncu.options import NcuOptions

from aorta_core import Launch, SetupError

STANDIN = Path(__file__).parent / "standin" / "ncu"
OUT = Path("/art/ncu")
COMMAND = ("python", "train.py", "--lr=0.1")


def wrapped(opts: NcuOptions, argv=COMMAND, env=None) -> list[str]:
    launch = Launch(argv=tuple(argv), env=env or {"NCU_BIN": str(STANDIN)}, cwd=Path("/"))
    return list(plugin.wrap_argv(launch, opts, OUT).argv)


def offline(**kw) -> NcuOptions:
    """Options with the host check off: this machine has no NVIDIA driver."""
    return NcuOptions(host_check=False, **kw)


HEAD = [str(STANDIN), "--target-processes", "all", "-f", "-o", str(OUT / "report")]
METRICS = ["--metrics", ",".join(REQUESTED)]
TAIL = ["--replay-mode", "kernel", "--clock-control", "base", "--cache-control", "all",
        "--", *COMMAND]


def test_default_argv():
    assert wrapped(offline()) == [*HEAD, "--set", "basic", *METRICS, *TAIL]


def test_every_option_in_a_fixed_order():
    opts = offline(set=["SpeedOfLight", "Occupancy", "SpeedOfLight"],
                   metrics=["dram__bytes_read.sum", "gpu__time_duration.sum"],
                   kernel_regex="gemm|softmax", launch_skip=2, launch_count=4,
                   replay_mode="application", target_processes="application-only",
                   clock_control="none", cache_control="none")
    assert wrapped(opts) == [
        str(STANDIN), "--target-processes", "application-only", "-f", "-o", str(OUT / "report"),
        "--section", "SpeedOfLight", "--section", "Occupancy",
        "--metrics", ",".join([*REQUESTED, "dram__bytes_read.sum"]),
        "-k", "regex:gemm|softmax", "--launch-skip", "2", "--launch-count", "4",
        "--replay-mode", "application", "--clock-control", "none", "--cache-control", "none",
        "--", *COMMAND,
    ]


def test_command_passed_byte_for_byte_after_separator():
    argv = ("./app", "--set", "a b", "x=1,2", "--")
    assert wrapped(offline(), argv=argv)[-6:] == ["--", *argv]


def test_empty_command_is_a_setup_error():
    with pytest.raises(SetupError, match="no command to run under ncu; give one after --"):
        wrapped(offline(), argv=())


def test_option_then_ncu_bin_then_path():
    env = {"PATH": str(STANDIN.parent)}
    assert wrapped(offline(), env=env)[0] == str(STANDIN)
    env["NCU_BIN"] = "/bin/sh"
    assert wrapped(offline(), env=env)[0] == "/bin/sh"
    assert wrapped(offline(ncu_bin="/bin/true"), env=env)[0] == "/bin/true"


def test_missing_ncu_names_the_option_the_variable_and_path():
    with pytest.raises(SetupError) as info:
        wrapped(offline(), env={"PATH": ""})
    assert str(info.value) == (
        "ncu is not on PATH; install Nsight Compute (CUDA toolkit) or set collector.ncu.ncu_bin "
        "or NCU_BIN to the ncu executable (e.g. /usr/local/cuda/bin/ncu)"
    )


def test_host_check_runs_by_default_and_refuses_a_machine_without_the_driver():
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(SetupError) as info:
        wrapped(NcuOptions())
    assert str(info.value).startswith("no NVIDIA GPU driver on this machine (/dev/nvidiactl is "
                                      "missing) and ncu profiles only NVIDIA GPUs")


def _host(tmp_path: Path, params: str | None, cap_eff: str) -> dict[str, Path]:
    (tmp_path / "nvidiactl").touch()
    (tmp_path / "status").write_text(f"Name:\tpython\nCapEff:\t{cap_eff}\n")
    if params is not None:
        (tmp_path / "params").write_text(params)
    return {"nvidiactl": tmp_path / "nvidiactl", "params": tmp_path / "params",
            "status": tmp_path / "status"}


ADMIN_ONLY = "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nRmMsg: \"\"\n"


@pytest.mark.parametrize(("params", "cap_eff"), [
    (None, "0000000000000000"),
    ("RmProfilingAdminOnly: 0\n", "0000000000000000"),
    (ADMIN_ONLY, "000001ffffffffff"),
    (ADMIN_ONLY, "0000000000200000"),
])
def test_counters_readable(tmp_path, params, cap_eff):
    check_host(**_host(tmp_path, params, cap_eff))


def test_admin_only_counters_without_cap_sys_admin_is_err_nvgpuctrperm(tmp_path):
    paths = _host(tmp_path, ADMIN_ONLY, "00000000a80425fb")  # docker's default set: no SYS_ADMIN
    with pytest.raises(SetupError) as info:
        check_host(**paths)
    assert str(info.value) == (
        "ERR_NVGPUCTRPERM: the NVIDIA driver lets only admin users read GPU performance counters "
        f"(RmProfilingAdminOnly: 1 in {paths['params']}); run as root (or with CAP_SYS_ADMIN), "
        "or let every user profile: 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in "
        "/etc/modprobe.d/, then reload the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
    )


def test_missing_driver_device(tmp_path):
    with pytest.raises(SetupError, match="nvidiactl is missing"):
        check_host(nvidiactl=tmp_path / "nvidiactl", params=tmp_path / "p",
                   status=tmp_path / "s")
