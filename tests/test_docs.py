"""Docs that cannot drift: every hook is documented with its exact signature, and the
complete collector example of docs/plugins.md runs as written."""

import inspect
import re
import sys
from pathlib import Path

import pluggy
from cli_helpers import records, run_aorta

from aorta_core import hookspecs

DOC = Path(__file__).parent.parent / "docs" / "plugins.md"


def _hooks():
    marker = pluggy.HookspecMarker("aorta")
    return [f for _, f in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(f, marker.project_name + "_spec")]


def test_every_hook_is_documented_with_its_signature():
    text = DOC.read_text()
    hooks = _hooks()
    assert {h.__name__ for h in hooks} == {"aorta_collector", "check_options", "wrap_argv",
                                           "collect_artifacts", "parse_metrics"}
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


def _python_block(first_line: str) -> str:
    match = re.search(rf"```python\n({re.escape(first_line)}\n.*?)```", DOC.read_text(), re.S)
    assert match, f"no python block starting {first_line!r} in {DOC.name}"
    return match.group(1)


def test_the_python_wrapping_example_is_complete_and_runs_in_a_real_sweep(tmp_path, plugin_site):
    """docs/plugins.md's cprofile collector, installed as written, wraps every torchrun rank."""
    source = _python_block("# aorta_cprofile/plugin.py")
    assert len(source.splitlines()) <= 80
    plugin_site.add("cprofile", source, package="aorta_cprofile")
    script = tmp_path / "work.py"
    script.write_text("def busy():\n    total = 0\n    for i in range(300000):\n"
                      "        total += i\n    return total\n\n\nbusy()\n")
    out = tmp_path / "sweep"
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone",
              "--nproc_per_node=2", str(script)]
    done = run_aorta(["sweep=repeat", "trials=1", "collector=cprofile", f"output={out}", "--",
                      *launch], cwd=tmp_path, env=plugin_site.env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = records(out)
    folder = record["metrics"]["cprofile_artifact_dir"]
    assert record["argv_run"] == [*launch[:-1], "-m", "aorta_cprofile.plugin", folder, str(script)]
    assert sorted(p.name for p in Path(folder).iterdir()) == ["rank0.prof", "rank1.prof"]
    assert record["metrics"]["cprofile_process_count"] == 2
    assert record["metrics"]["cprofile_calls"] > 0
    assert record["metrics"]["cprofile_top_functions"][0] == "busy (work.py:1)"
    refused = run_aorta(["sweep=repeat", "trials=1", "collector=cprofile",
                         f"output={tmp_path / 'refused'}", "--", "bash", "-c", "true"],
                        cwd=tmp_path, env=plugin_site.env)
    assert refused.returncode == 1
    (record,) = records(tmp_path / "refused")
    assert record["verdict"] == "error" and "cprofile runs `python script.py`" in record["error"]
