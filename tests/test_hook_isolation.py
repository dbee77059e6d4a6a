"""Hooks run in aorta's own process (docs/sweeps.md, "Guarantees": hook isolation): what one
changes there — the working directory, ``os.environ``, fd 1, the process's life — must not reach
later trials, other collectors, the JSON a script reads, or end the sweep. Each attack goes
through the real CLI with a collector installed as a real distribution. Any machine: the
workload is ``sh``/``true``."""

from __future__ import annotations

import json
import time
from importlib.metadata import entry_points
from pathlib import Path

from cli_helpers import records, run_aorta

#: Keep every collector installed in this environment out of these tests' way.
ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": ",".join(
    sorted({ep.name for ep in entry_points(group="aorta.collectors")}))}

#: ``wrap_argv`` changes the process (cwd and os.environ, as ``fault`` says); ``parse_metrics``
#: reports what it sees of both, as any other collector's hook would.
LEAKY = '''
import os
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    fault: str = "none"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="changes the process", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    os.chdir("/")
    os.environ["AORTA_TEST_LEAK"] = "leaked"
    os.environ["_AORTA_TEST_LIB_CONF"] = "set on import"  # what polars does: restored silently
    os.environ.pop("AORTA_TEST_KEPT", None)
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    return {"leaky_cwd": os.getcwd(), "leaky_leak": os.environ.get("AORTA_TEST_LEAK", "unset"),
            "leaky_kept": os.environ.get("AORTA_TEST_KEPT", "unset"),
            "leaky_lib": os.environ.get("_AORTA_TEST_LIB_CONF", "unset")}
'''


def test_a_hook_that_changes_cwd_and_environ_is_undone_and_named(plugin_site, tmp_path: Path):
    plugin_site.add("leaky", LEAKY)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", "collector=leaky", f"output={out}", "--",
                      "sh", "-c", 'pwd; echo "${AORTA_TEST_LEAK-unset} ${AORTA_TEST_KEPT-unset}"'],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS,
                                        "AORTA_TEST_KEPT": "kept"})
    assert done.returncode == 0, done.stderr
    trials = sorted(out.glob("cells/*/trial_*"))
    assert len(trials) == 2
    for folder in trials:  # the 2nd trial's launch was built after the 1st trial's wrap_argv
        log = (folder / "stdout.log").read_text().split("\n")
        assert log[:2] == [str(tmp_path), "unset kept"], folder
        trial = json.loads((folder / "record.json").read_text())
        assert trial["metrics"]["leaky_cwd"] == str(tmp_path)
        assert trial["metrics"]["leaky_leak"] == "unset"
        assert trial["metrics"]["leaky_kept"] == "kept"
        assert trial["metrics"]["leaky_lib"] == "unset"
    warned = [line for line in done.stderr.splitlines() if "changed the working directory" in line]
    assert len(warned) == 2, done.stderr  # one line per call, naming collector, hook and change
    assert warned[0].startswith("aorta: warning: leaky: wrap_argv changed the working directory "
                                "(to '/') and os.environ (AORTA_TEST_KEPT, AORTA_TEST_LEAK); "
                                "restored")


#: Prints on import, in aorta_collector and in parse_metrics, from Python and straight to fd 1.
NOISY = '''
import os
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

print("noisy: imported")

@dataclass
class Options:
    level: int = 1

@hookimpl
def aorta_collector():
    print("noisy: describing myself")
    return CollectorInfo(description="prints", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    print("noisy: parsing", flush=False)
    os.write(1, b"noisy: raw bytes on fd 1\\n")
    return {"noisy_files": len(list(artifact_dir.iterdir()))}
'''


def test_a_plugin_that_prints_cannot_corrupt_json_on_stdout(plugin_site, tmp_path: Path):
    plugin_site.add("noisy", NOISY)
    env = {**plugin_site.env, **ONLY_TEST_PLUGINS}
    parsed = run_aorta(["parse", "noisy", str(tmp_path)], cwd=tmp_path, env=env)
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["noisy_files"] == 1  # site/ is the one entry
    for noise in ("imported", "describing myself", "parsing", "raw bytes on fd 1"):
        assert f"noisy: {noise}" in parsed.stderr
    listed = run_aorta(["plugins", "--json"], cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["status"] for r in json.loads(listed.stdout) if r["name"] == "noisy"] == ["ok"]
    assert "noisy: imported" in listed.stderr
    version = run_aorta(["--version"], cwd=tmp_path, env=env)
    assert version.returncode == 0, version.stderr
    assert all(line.startswith(("aorta-core ", "collector ")) for line in
               version.stdout.splitlines()), version.stdout


def test_help_does_not_import_a_slow_plugin(plugin_site, tmp_path: Path):
    sleep_s = 8
    plugin_site.add("slow", LEAKY.replace("leaky_", "slow_"))
    # The package's own __init__: importing its config package (slow.conf) would run it.
    (plugin_site.root / "aorta_test_slow" / "__init__.py").write_text(
        f"import time\ntime.sleep({sleep_s})\n")
    started = time.monotonic()
    done = run_aorta(["--help"], cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "collector: slow\n" in done.stdout
    assert took < sleep_s / 2, f"--help took {took:.1f} s: it imported the plugin"


#: os._exit in a hook's thread; a child it forks must still really exit (status 5).
EXITS = '''
import os
import threading
import time
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    fault: str = "none"

@hookimpl
def aorta_collector():
    return CollectorInfo(description="os._exit on demand", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    if options.fault == "wrap_exits":
        os._exit(7)
    return launch

@hookimpl
def parse_metrics(artifact_dir, options):
    pid = os.fork()
    if pid == 0:
        os._exit(5)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if options.fault == "parse_exits":
        os._exit(7)
    if options.fault == "thread_exits":
        threading.Thread(target=os._exit, args=(9,)).start()
        time.sleep(30)
    return {"exits_child_status": status}
'''


def test_os_exit_in_a_hook_ends_only_that_hook(plugin_site, tmp_path: Path):
    plugin_site.add("exits", EXITS)
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=exits",
                      "collector.exits.fault=none,wrap_exits,parse_exits", f"output={out}",
                      "--", "true"], cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 1, done.stderr  # the sweep went on: one setup error
    assert "Traceback" not in done.stderr
    by_fault = {r["axes"]["collector.exits.fault"]: r for r in records(out)}
    assert set(by_fault) == {"none", "wrap_exits", "parse_exits"}
    assert by_fault["none"]["metrics"]["exits_child_status"] == 5  # the forked child exited
    assert by_fault["wrap_exits"]["error"] == "exits: wrap_argv exited with status 7"
    parse = by_fault["parse_exits"]
    assert parse["verdict"] == "pass" and "exits_child_status" not in parse["metrics"]
    assert "parse_metrics failed: exited with status 7" in parse["warnings"]["exits"]
    assert (out / ".aorta.lock").read_text() == ""  # released by the sweep, not by its death
    assert (out / "matrix.json").is_file()


def test_os_exit_from_a_thread_a_hook_started_ends_only_that_hook(plugin_site, tmp_path: Path):
    """The hook runs in a process of its own: a thread it started that calls ``os._exit`` ends
    that process, not aorta's, and the sweep goes on to its matrix."""
    plugin_site.add("exits", EXITS)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", "collector=exits",
                      "collector.exits.fault=thread_exits", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    for record in records(out):
        assert record["verdict"] == "pass"
        assert record["warnings"]["exits"] == ["parse_metrics failed: exited with status 9"]
    assert len(records(out)) == 2 and (out / "matrix.json").is_file()
    assert (out / ".aorta.lock").read_text() == ""


def test_os_exit_on_import_costs_only_that_plugin(plugin_site, tmp_path: Path):
    plugin_site.add("exits", "import os\nos._exit(7)\n")
    done = run_aorta(["plugins", "--json"], cwd=tmp_path,
                     env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in json.loads(done.stdout) if r["name"] == "exits"]
    assert (row["status"], row["error"]) == ("error", "exited with status 7")
