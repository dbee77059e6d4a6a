"""Docs that cannot drift: every hook and helper is documented with its exact signature. The
complete collector of docs/plugins.md is examples/plugin verbatim and runs from its wheel
(tests/test_plugins.py)."""

import inspect
from pathlib import Path

import pluggy

from aorta_core.api import hookspecs

DOC = Path(__file__).parent.parent / "docs" / "plugins.md"


def _hooks():
    marker = pluggy.HookspecMarker("aorta")
    return [f for _, f in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(f, marker.project_name + "_spec")]


def test_every_hook_is_documented_with_its_signature():
    text = DOC.read_text()
    hooks = _hooks()
    assert {h.__name__ for h in hooks} == {
        "aorta_collector", "aorta_commands", "check_options", "resource_claims", "check_machine",
        "wrap_argv", "payload_session", "collect_artifacts", "parse_metrics", "kernel_table",
        "timeline_sources", "report_sections"}
    for hook in hooks:
        signature = str(inspect.signature(hook)).replace("'", "")
        assert f"### `{hook.__name__}{signature}`" in text, f"{hook.__name__} undocumented"
        assert hook.__doc__, f"{hook.__name__} has no docstring"


def test_every_plugin_helper_is_documented_with_its_signature():
    import aorta_core

    text = DOC.read_text()
    helpers = ["open_limited", "read_limited", "mapped_limited", "check_regular", "read_limit",
               "json_number", "parallel_map", "decoded_bytes", "without_bom"]
    assert set(helpers) <= set(aorta_core.__all__)
    for name in helpers:
        function = getattr(aorta_core, name)
        signature = str(inspect.signature(function)).replace("'", "")
        assert f"### `{name}{signature}`" in text, f"{name} undocumented"
        assert function.__doc__, f"{name} has no docstring"
    assert "### `FileRefused(OSError)`" in text and issubclass(aorta_core.FileRefused, OSError)
