"""Each hook call runs in a child process forked from aorta (docs/sweeps.md, "Guarantees": hook
isolation): what a hook does there — change the working directory, ``os.environ``, fd 1,
``sys.stderr`` or the recursion limit, end its process, hold the GIL, leave threads running,
return what cannot be read — must not reach later trials, other collectors, the JSON a script
reads, aorta's own lines, or end the sweep. Each attack goes through the real CLI with a
collector installed as a real distribution. Linux (``/proc`` to find a hook's process); the
workload is ``sh``/``true``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

from cli_helpers import GOOD_COLLECTOR, records, run_aorta

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


#: Each ``answer`` an odd return value or act of issue 40 item 1, item 5 or item 16.
ODD = '''
import concurrent.futures, io, re, sys, time
from dataclasses import dataclass
from aorta_core import CollectorInfo, hookimpl

@dataclass
class Options:
    answer: str = "none"

class Raises:
    """Reading it as text raises."""
    def __str__(self):
        raise RuntimeError("no text")
    __repr__ = __str__

class Unreadable(dict):
    def items(self):
        raise RuntimeError("no items")

class Incomparable(int):
    def __le__(self, other):
        raise RuntimeError("no comparison")
    __ge__ = __lt__ = __gt__ = __le__

def lowered():
    for limit in range(5, 10_000):  # the lowest this depth allows
        try:
            sys.setrecursionlimit(limit)
            return {"odd_ok": 1}
        except RecursionError:
            continue

METRICS = {
    "items_raise": lambda: Unreadable(odd_n=1),
    "key_str_raises": lambda: {Raises(): 1, "odd_ok": 1},
    "value_repr_raises": lambda: {"odd_bad": Raises(), "odd_ok": 1},
    "number_compare_raises": lambda: {"odd_n": Incomparable(5), "odd_ok": 1},
    "recursion_limit": lowered,
}

@hookimpl
def aorta_collector():
    return CollectorInfo(description="odd answers", options=Options,
                         config_package=__package__ + ".conf")

@hookimpl
def wrap_argv(launch, options, artifact_dir):
    return launch

@hookimpl
def collect_artifacts(artifact_dir, options, run):
    trace = artifact_dir / "trace.json"
    if options.answer == "thread_left":  # never shut down: its thread is not a daemon
        concurrent.futures.ThreadPoolExecutor(1).submit(time.sleep, 3600)
    return {"none_in_list": [trace if trace.exists() else None], "int_in_list": [3],
            "bytes_in_list": [b"trace.json"]}.get(options.answer)

@hookimpl
def parse_metrics(artifact_dir, options):
    if options.answer == "backtracks":  # holds the GIL: no thread of the process runs
        re.match(r"(a+)+$", "a" * 64 + "b")
    if options.answer == "sleeps":
        time.sleep(3600)
    if options.answer == "closes_stderr":
        sys.stderr.close()
        sys.stdout.close()
    if options.answer == "replaces_stderr":
        sys.stderr, sys.stdout = io.StringIO(), None
    return METRICS.get(options.answer, lambda: {"odd_ok": 1})()
'''

#: What each odd answer costs: a warning of the collector, never the record, the payload's own
#: files or the rest of the sweep.
ODD_NOTES = {
    "none_in_list": "collect_artifacts returned 1 item(s) that are not paths (NoneType; a path "
                    "is str or os.PathLike); left out of the record",
    "int_in_list": "collect_artifacts returned 1 item(s) that are not paths (int; a path is str "
                   "or os.PathLike); left out of the record",
    "bytes_in_list": "collect_artifacts returned 1 item(s) that are not paths (bytes; a path is "
                     "str or os.PathLike); left out of the record",
    "items_raise": "odd metrics cannot be read (RuntimeError raised while reading them); ignored",
    "key_str_raises": "metric of type Raises (RuntimeError raised showing it) lacks the odd_ "
                      "prefix; dropped",
    "value_repr_raises": "metric 'odd_bad' has an unusable value of type Raises (RuntimeError "
                         "raised showing it); dropped",
}


def test_an_odd_return_value_costs_a_warning_never_the_record_or_the_output(plugin_site,
                                                                             tmp_path: Path):
    plugin_site.add("odd", ODD)
    out = tmp_path / "out"
    answers = [*ODD_NOTES, "number_compare_raises", "recursion_limit"]
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=odd",
                      f"collector.odd.answer={','.join(answers)}", f"output={out}", "--",
                      "sh", "-c", 'echo measured > "$AORTA_TRIAL_DIR/payload.txt"'],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    by_answer = {r["axes"]["collector.odd.answer"]: r for r in records(out)}
    assert set(by_answer) == set(answers)
    for answer, record in by_answer.items():
        assert record["verdict"] == "pass", answer
        folder = out / "cells" / record["cell"] / "trial_000"
        assert (folder / "payload.txt").read_text() == "measured\n", answer
    for answer, note in ODD_NOTES.items():
        assert note in by_answer[answer]["warnings"]["odd"], (answer, by_answer[answer])
    assert by_answer["number_compare_raises"]["metrics"]["odd_n"] == 5
    assert by_answer["recursion_limit"]["metrics"]["odd_ok"] == 1
    assert (out / "matrix.json").is_file()


def test_a_hook_that_holds_the_gil_is_killed_at_hook_timeout(plugin_site, tmp_path: Path):
    """Catastrophic backtracking holds the GIL for ever: a thread could not even be abandoned.
    The hook's process is killed at ``hook_timeout`` and the sweep finishes."""
    plugin_site.add("odd", ODD)
    out = tmp_path / "out"
    started = time.monotonic()
    done = run_aorta(["sweep=repeat", "trials=2", "collector=odd", "collector.odd.answer="
                      "backtracks", "hook_timeout=2", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    for record in records(out):
        assert record["warnings"]["odd"] == [
            "parse_metrics failed: did not return within 2 s (hook_timeout)"]
    assert len(records(out)) == 2 and (out / "matrix.json").is_file()


def test_sigterm_during_a_gil_holding_hook_ends_the_sweep_at_once(plugin_site, tmp_path: Path):
    plugin_site.add("odd", ODD)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=1", "collector=odd",
         "collector.odd.answer=backtracks", f"output={out}", "--", "true"],
        cwd=tmp_path, env={**os.environ, **plugin_site.env, **ONLY_TEST_PLUGINS,
                           "AORTA_REPORT_PNG": "0"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob("cells/*/trial_000/stdout.log")) and time.monotonic() < deadline:
        time.sleep(0.05)
    hooks = _children_of(proc.pid)
    while not hooks and time.monotonic() < deadline:  # the hook's process, backtracking
        hooks = _children_of(proc.pid)
    assert hooks, "the hook's process never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=10)[1]
    assert proc.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith("aorta: error: terminated (SIGTERM): ")
    assert not any(map(_running, hooks)), "the hook lives on"


def test_kill_9_of_aorta_ends_the_hook_it_was_waiting_for(plugin_site, tmp_path: Path):
    """The hook's process has a group of its own, which the payload's watchdog knows nothing
    of: the kernel ends it with aorta (``PR_SET_PDEATHSIG``)."""
    plugin_site.add("odd", ODD)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aorta_core", "sweep=repeat", "trials=1", "collector=odd",
         "collector.odd.answer=sleeps", f"output={out}", "--", "true"],
        cwd=tmp_path, env={**os.environ, **plugin_site.env, **ONLY_TEST_PLUGINS},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    hooks: list[int] = []
    while not hooks and time.monotonic() < deadline:
        if list(out.glob("cells/*/trial_000/stdout.log")):
            hooks = _children_of(proc.pid)
        time.sleep(0.05)
    assert hooks, "the hook's process never started"
    time.sleep(0.5)  # in the sleeping parse_metrics
    proc.kill()
    proc.wait()
    while any(map(_running, hooks)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_running, hooks)), "the hook outlived aorta"


def _running(pid: int) -> bool:
    """``pid`` runs (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children_of(pid: int) -> list[int]:
    """The processes forked from ``pid`` (its command line; not its watchdog, not a payload)."""
    def cmdline(p):
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            return None
    children = [int(c) for listing in Path(f"/proc/{pid}/task").glob("*/children")
                for c in listing.read_text().split()]
    return [c for c in children if cmdline(c) == cmdline(pid)]


def test_a_thread_a_hook_leaves_running_does_not_keep_aorta_alive(plugin_site, tmp_path: Path):
    plugin_site.add("odd", ODD)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", "collector=odd", "collector.odd.answer="
                      "thread_left", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (out / "matrix.json").is_file()


def test_a_hook_that_closes_or_replaces_stderr_silences_nothing_of_aorta(plugin_site,
                                                                         tmp_path: Path):
    """Also a plugin that replaces ``sys.stderr`` as it is imported: aorta's console is bound
    to the stderr of its start."""
    plugin_site.add("odd", ODD.replace("import concurrent.futures, io, re, sys, time",
                                       "import concurrent.futures, io, re, sys, time\n"
                                       "sys.stderr = io.StringIO()"))
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=odd", "collector.odd.answer="
                      "closes_stderr,replaces_stderr", f"output={out}", "--", "true"],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    for answer in ("closes_stderr", "replaces_stderr"):
        assert f"collector.odd.answer={answer} trial 1/1 pass" in done.stderr, done.stderr
    assert f"wrote {out / 'report.html'}" in done.stderr
    assert all(r["metrics"]["odd_ok"] == 1 for r in records(out))


def test_columns_0_drops_no_line_of_aorta(tmp_path: Path):
    done = run_aorta(["colector=torchprof"], cwd=tmp_path, env={"COLUMNS": "0"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "aorta: error: colector is not a setting; did you mean `collector`?"]
    listed = run_aorta(["plugins"], cwd=tmp_path, env={"COLUMNS": "0"})
    assert listed.returncode == 0 and "aorta collectors" in listed.stdout, listed.stderr


POLARS_SECTION = '''
@hookimpl
def report_sections(matrix, output_dir):
    import polars as pl
    from aorta_core.api import ReportSection
    frame = pl.DataFrame({"cell": [c["cell"] for c in matrix["cells"]] * 1000,
                          "n": list(range(1000 * len(matrix["cells"])))})
    total = frame.group_by("cell").agg(pl.col("n").sum())
    return [ReportSection(title="polars total", text=f"{total.height} cell(s) summed")]
'''


def test_a_report_section_that_queries_with_polars_is_not_stuck_after_the_matrix(
        tmp_path: Path, plugin_site):
    """The matrix's polars queries start polars' thread pool in aorta's process; a forked child
    would have none of its threads. The section is written, well before ``hook_timeout``."""
    plugin_site.add("tally", GOOD_COLLECTOR.format(name="tally", order=50) + POLARS_SECTION)
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=1", f"output={out}", "collector=tally",
                      "hook_timeout=60", "--", "true"], cwd=tmp_path, env=plugin_site.env,
                     timeout=100)
    assert done.returncode == 0, done.stderr
    assert "did not return" not in done.stderr
    assert "1 cell(s) summed" in (out / "perf.md").read_text()


def test_plugins_load_once_polars_threads_run(tmp_path: Path, plugin_site):
    """A tool that read a table before it loaded the plugins has polars' pool running: there is
    no child to try an import in, and a try in a thread would register each plugin twice (every
    collector unusable, "Plugin name already registered"). Each loads once, as it would first."""
    plugin_site.add("tally", GOOD_COLLECTOR.format(name="tally", order=50))
    script = (
        "import polars as pl\n"
        "pl.DataFrame({'a': list(range(100_000))}).group_by('a').agg(pl.len())\n"
        "from aorta_core.engine.isolation import _threads_no_child_has\n"
        "from aorta_core.engine.plugins import load_registry\n"
        "assert _threads_no_child_has()\n"
        "for s in load_registry().statuses: print(s.name, s.status, s.error)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, **plugin_site.env}, timeout=120)
    assert done.returncode == 0, done.stderr
    statuses = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert statuses["tally"] == "ok None", done.stdout
    assert all(not s.startswith("error") for s in statuses.values()), done.stdout
