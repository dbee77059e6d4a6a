"""The helpers collectors import from ``aorta_core``: one lookup order and one wording for all."""

from __future__ import annotations

from pathlib import Path

import pytest

from aorta_core import OptionError, SetupError, check_regex, find_executable

HINTS = {"env_var": "TOOL_BIN", "install_hint": "install the tool", "example": "/opt/tool"}


def _exe(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_option_wins_over_the_variable_which_wins_over_path(tmp_path):
    on_path, by_var, by_option = (_exe(tmp_path, n) for n in ("tool", "tool-var", "tool-opt"))
    env = {"PATH": str(tmp_path)}
    assert find_executable("tool", env, **HINTS) == str(on_path)
    env["TOOL_BIN"] = "tool-var"
    assert find_executable("tool", env, **HINTS) == str(by_var)
    found = find_executable("tool", env, **HINTS, option_key="c.tool_bin",
                            option_value=str(by_option))
    assert found == str(by_option)


@pytest.mark.parametrize(("option", "env", "message"), [
    (None, {"PATH": ""}, "tool is not on PATH; install the tool or set c.bin or TOOL_BIN to the "
     "tool executable (e.g. /opt/tool)"),
    ("/no/tool", {"PATH": ""}, "c.bin=/no/tool is not an executable file; point c.bin at tool or "
     "unset it to use TOOL_BIN or tool from PATH"),
    (None, {"PATH": "", "TOOL_BIN": "/no/tool"}, "TOOL_BIN=/no/tool is not an executable file; "
     "point TOOL_BIN at tool or unset it to use tool from PATH"),
    ("tool2", {"PATH": ""}, "c.bin=tool2 is not found on PATH; give c.bin as a full path to tool "
     "or add its folder to PATH"),
])
def test_setup_errors_name_every_way_out(option, env, message):
    with pytest.raises(SetupError) as info:
        find_executable("tool", env, **HINTS, option_key="c.bin", option_value=option)
    assert str(info.value) == message


def test_check_regex_passes_unset_and_valid_patterns():
    check_regex("c.regex", None)
    check_regex("c.regex", "gemm|softmax")


@pytest.mark.parametrize(("value", "message"), [
    ("  ", "c.regex is blank; give a regular expression or null"),
    ("gemm(", "c.regex='gemm(' does not compile (missing ), unterminated subpattern at position "
     "4); fix the regular expression"),
])
def test_check_regex_refuses_with_one_line(value, message):
    with pytest.raises(OptionError) as info:
        check_regex("c.regex", value)
    assert str(info.value) == message
