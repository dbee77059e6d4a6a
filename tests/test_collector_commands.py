"""``aorta <name>``: commands that collectors add through ``aorta_commands``, installed as real
distributions and run through the real CLI. Any machine."""

from __future__ import annotations

import json

from cli_helpers import good_collector, run_aorta
from test_plugins import ONLY_TEST_PLUGINS

COMMANDS = '''
import sys
from aorta_core import Command

def _echo(args):
    print("echo:" + "|".join(args))
    return 3 if "--fail" in args else 0

def _crash(args):
    raise RuntimeError("the tape snapped")

@hookimpl
def aorta_commands():
    return {commands}
'''


def _install(site, name: str, commands: str) -> None:
    site.add(name, good_collector(name) + COMMANDS.format(commands=commands))


def _aorta(site, tmp_path, *args):
    return run_aorta(list(args), cwd=tmp_path,
                     env={**site.env, **ONLY_TEST_PLUGINS, "COLUMNS": "200"})


def test_a_collector_command_gets_its_arguments_stdout_and_exit_status(plugin_site, tmp_path):
    _install(plugin_site, "tape", '{"tape-echo": Command("echo the arguments", main=_echo)}')
    done = _aorta(plugin_site, tmp_path, "tape-echo", "a b", "--x=1")
    assert (done.returncode, done.stdout) == (0, "echo:a b|--x=1\n"), done.stderr
    assert _aorta(plugin_site, tmp_path, "tape-echo", "--fail").returncode == 3
    rows = json.loads(_aorta(plugin_site, tmp_path, "plugins", "--json").stdout)
    assert {r["name"]: r["commands"] for r in rows if r["status"] == "ok"} == {
        "tape": ["tape-echo"]}
    listing = _aorta(plugin_site, tmp_path, "plugins")
    assert "adds aorta tape-echo" in " ".join(listing.stdout.split())


def test_a_crashing_command_is_one_line_and_status_1(plugin_site, tmp_path):
    _install(plugin_site, "tape", '{"rewind": Command("rewind", main=_crash)}')
    done = _aorta(plugin_site, tmp_path, "rewind")
    assert done.returncode == 1
    assert done.stderr.strip() == ("aorta: error: aorta rewind (collector tape) failed: "
                                   "RuntimeError: the tape snapped")


def test_taken_reserved_and_malformed_names_cost_only_that_command(plugin_site, tmp_path):
    _install(plugin_site, "alpha", '{"echo": Command("a", main=_echo), '
             '"matrix": Command("b", main=_echo), "bad name": Command("c", main=_echo)}')
    _install(plugin_site, "beta", '{"echo": Command("d", main=_crash), '
             '"beta-echo": Command("e", main=_echo)}')
    _install(plugin_site, "gamma", '"not a dict"')
    done = _aorta(plugin_site, tmp_path, "beta-echo", "ok")
    assert (done.returncode, done.stdout) == (0, "echo:ok\n"), done.stderr
    warnings = [" ".join(line.split()) for line in done.stderr.splitlines()]
    assert warnings == [
        "aorta: warning: collector alpha: 'matrix' is one of aorta's own commands; that "
        "command is left out",
        "aorta: warning: collector alpha: aorta_commands entry 'bad name' is not a command name "
        "(letters, digits, '-') with a Command whose main is callable; that command is left out",
        "aorta: warning: collector beta: 'echo' is already added by collector alpha; that "
        "command is left out",
        "aorta: warning: collector gamma: aorta_commands returned str, not a dict of Command; "
        "that command is left out",
    ]
    assert _aorta(plugin_site, tmp_path, "echo", "x").stdout == "echo:x\n"  # alpha's, first


def test_a_word_that_is_no_command_is_still_refused_as_a_sweep_argument(plugin_site, tmp_path):
    plugin_site.add("plain", good_collector("plain"))
    done = _aorta(plugin_site, tmp_path, "nosuch")
    assert done.returncode == 2
    assert "'nosuch' is not an override (key=value)" in done.stderr
