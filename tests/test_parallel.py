"""aorta_core.parallel_map: real worker processes, in order, failures per item."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import parallel_tasks
import pytest
from test_parse_pool import _alive

from aorta_core.api.parallel import (
    WORKERS_ENV,
    available_memory,
    decoded_bytes,
    parallel_map,
    shared_workers,
    usable_cores,
)


def test_values_come_back_in_order_from_other_processes() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = list(parallel_map(parallel_tasks.square, range(6), workers=2))
    assert [d.item for d in done] == list(range(6))
    assert [d.value[0] for d in done] == [n * n for n in range(6)]
    assert {d.value[1] for d in done} - {os.getpid()}, "nothing ran in a worker"
    # a worker's warning is re-emitted here, where the caller's catch_warnings sees it
    assert [str(w.message).split(" (")[0] for w in caught] == ["three is odd"]


_UNGUARDED = """\
import os, parallel_tasks
from aorta_core.api.parallel import parallel_map
done = list(parallel_map(parallel_tasks.square, [2, 5, 7], workers=2))
print([d.error for d in done], [d.value[0] for d in done if d.value],
      bool({d.value[1] for d in done if d.value} - {os.getpid()}))
"""
_FN_IN_MAIN = """\
import os
from aorta_core.api.parallel import parallel_map
def triple(n):
    return n * 3, os.getpid()
if __name__ == "__main__":
    done = list(parallel_map(triple, [2, 5, 7], workers=2))
    print([d.error for d in done], [d.value[0] for d in done if d.value],
          bool({d.value[1] for d in done if d.value} - {os.getpid()}))
"""


@pytest.mark.skipif(usable_cores() < 2, reason="needs 2 or more usable cores for a pool")
@pytest.mark.parametrize(("how", "script", "values"), [
    ("stdin", _UNGUARDED, [4, 25, 49]), ("file", _UNGUARDED, [4, 25, 49]),
    ("file", _FN_IN_MAIN, [6, 15, 21])], ids=["stdin", "unguarded_file", "fn_in_main"])
def test_the_callers_script_is_not_run_again_in_workers(how: str, script: str,
                                                        values: list[int], tmp_path: Path):
    """multiprocessing runs the main script again in each worker it starts: ``python - <<EOF``
    (named ``<stdin>``, no file) and a script without a ``__main__`` guard killed every worker
    (diagnose said 'its worker process died' for every rank). A script whose ``fn`` lives in it
    still gets it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "run.py").write_text(script)
    argv = [sys.executable, "-"] if how == "stdin" else [sys.executable, "run.py"]
    done = subprocess.run(argv, input=script if how == "stdin" else None, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[None, None, None] {values} True", \
        done.stderr[-2000:]


def test_one_worker_runs_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert {d.value[1] for d in parallel_map(parallel_tasks.square, range(3))} == {os.getpid()}
    monkeypatch.delenv(WORKERS_ENV)
    assert [d.value[1] for d in parallel_map(parallel_tasks.square, [5])] == [os.getpid()]


@pytest.mark.parametrize("workers", [1, 2])
def test_each_failure_costs_its_item_only(workers: int) -> None:
    items = [0, 1, 2, 4] + ([3] if workers > 1 else [])  # SIGKILL would end this process
    done = {d.item: d for d in parallel_map(parallel_tasks.fail_on, items, workers=workers)}
    assert done[0].value == 0 and done[4].value == 4
    assert done[1].error == "ValueError: one is not allowed" and not done[1].memory
    assert done[2].error.startswith("out of memory (") and done[2].memory
    if workers > 1:
        assert "worker process died" in done[3].error and done[3].memory


@pytest.mark.skipif(usable_cores() < 2, reason="needs 2 or more usable cores for a pool")
def test_a_pool_that_breaks_while_items_are_submitted_loses_none() -> None:
    """A worker killed outright breaks the pool, and the next submit raises: the item being
    submitted then was lost (16 of 180 items over 30 such maps here), where it must be run
    again with the others still pending."""
    items = [0, 3, 0.5, 4, 5, 6]  # 3 kills its worker while the fast ones finish and refill
    for _ in range(30):  # a race: on the old code 2 runs of this test in 3 failed
        done = {d.item: d for d in parallel_map(parallel_tasks.fail_on, items, workers=2)}
        assert sorted(done) == sorted(items)
        assert [done[n].value for n in items if n != 3] == [n for n in items if n != 3]
        assert "worker process died" in done[3].error


_LATE_WORKER = """
import json, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.process import BaseProcess
sys.path.insert(0, sys.argv[1])
import parallel_tasks
from aorta_core.api.parallel import parallel_map

started, spawning = [], []
spawn, start = ProcessPoolExecutor._spawn_process, BaseProcess.start

def spawn_noting_the_pool(pool):
    spawning.append(pool)
    try:
        spawn(pool)
    finally:
        spawning.pop()

def start_then_wait_for_the_break(proc):
    # the race made likely: the submit that starts a pool's second worker ends (and the pool
    # learns of that worker) only once the first worker has died and the pool has broken
    start(proc)
    started.append(proc.pid)
    pool = spawning[-1] if spawning else None
    if pool is not None and pool._processes:
        deadline = time.monotonic() + 5
        while not pool._broken and time.monotonic() < deadline:
            time.sleep(0.001)

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False

ProcessPoolExecutor._spawn_process = spawn_noting_the_pool
BaseProcess.start = start_then_wait_for_the_break
done = {d.item: d for d in parallel_map(parallel_tasks.fail_on, [3, 0, 4], workers=2)}
deadline = time.monotonic() + 5  # the forkserver reaps ended workers in its own time
while any(map(alive, started)) and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"values": [done[0].value, done[4].value], "error": done[3].error,
                  "started": len(started), "alive": [p for p in started if alive(p)]}))
"""


@pytest.mark.skipif(usable_cores() < 2, reason="needs 2 or more usable cores for a pool")
@pytest.mark.parametrize("attempt", range(3))
def test_a_worker_started_as_the_pool_breaks_is_ended_too(attempt: int) -> None:
    """CPython's pool, when a worker dies, terminates the workers it knows and joins them all;
    a worker that a submit started meanwhile was never terminated, so the join (and the map)
    waited forever: a CI run hung in test_a_pool_that_breaks_while_items_are_submitted. Here
    the submit that starts the pool's second worker is held until the pool has broken (the race
    made likely, not certain): the map ends, every item has its result, and no worker outlives
    it."""
    env = {**os.environ, WORKERS_ENV: ""}
    done = subprocess.run([sys.executable, "-c", _LATE_WORKER, str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["values"] == [0, 4] and "worker process died" in seen["error"]
    assert seen["started"] >= 2 and seen["alive"] == [], seen


def test_a_pool_that_broke_under_a_future_it_never_failed_is_seen_broken() -> None:
    """A submit racing the pool's break may add its item after the pool failed the items it
    held: that future never resolves. Waiting for it ends when the pool is seen broken."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from aorta_core.api.parallel import _wait_one

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))
    try:
        with pytest.raises(BrokenProcessPool):
            pool.submit(parallel_tasks.fail_on, 3).result(timeout=60)
        with pytest.raises(BrokenProcessPool):
            _wait_one(pool, {0: Future()})  # a future the pool never saw
    finally:
        pool.shutdown(wait=True)


def test_an_item_that_cannot_fit_is_refused_before_it_runs() -> None:
    free = available_memory()
    assert free is not None and free > 0
    done = list(parallel_map(parallel_tasks.square, [2, 7], need=lambda n: free * n, workers=2))
    assert done[0].error.startswith("needs about") and done[0].memory
    assert done[0].error.endswith("not attempted") and done[1].error is not None


def test_workers_see_the_environment_of_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    list(parallel_map(parallel_tasks.env, ["A", "B"], workers=2))  # the forkserver is up
    monkeypatch.setenv("AORTA_READ_LIMIT_MB", "7")
    done = list(parallel_map(parallel_tasks.env, ["AORTA_READ_LIMIT_MB"] * 2, workers=2))
    assert [d.value for d in done] == ["7", "7"]


def test_decoded_bytes_reads_the_gzip_trailer(tmp_path) -> None:
    import gzip

    (tmp_path / "a.json").write_bytes(b"x" * 1000)
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(b"x" * 100_000))
    assert decoded_bytes(tmp_path / "a.json") == 1000
    assert decoded_bytes(tmp_path / "a.json.gz") == 100_000


def test_calls_inside_shared_workers_reuse_one_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with shared_workers():
            first = {d.value[1] for d in parallel_map(parallel_tasks.square, range(4), workers=2)}
            monkeypatch.setenv("AORTA_TEST_SHARED", "second call")  # seen by the kept workers
            envs = [d.value for d in parallel_map(parallel_tasks.env, ["AORTA_TEST_SHARED"] * 2,
                                                   workers=2)]
            second = {d.value[1] for d in parallel_map(parallel_tasks.square, range(4),
                                                        workers=2)}
            # a worker killed in a shared pool costs its item; the next call gets a new pool
            done = {d.item: d for d in parallel_map(parallel_tasks.fail_on, [0, 3, 4],
                                                    workers=2)}
            after = {d.value[1] for d in parallel_map(parallel_tasks.square, range(4),
                                                       workers=2)}
        apart = [{d.value[1] for d in parallel_map(parallel_tasks.square, range(4), workers=2)}
                 for _ in range(2)]
    kept = first | second  # a fast worker may take every item of one call: compare the pool
    assert os.getpid() not in kept and len(kept) <= 2, "the second call started new workers"
    assert envs == ["second call"] * 2
    assert "worker process died" in done[3].error and done[4].value == 4
    assert after and not after & kept and os.getpid() not in after
    for pid in kept | after:  # the block's end ended its workers
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not apart[0] & apart[1], "outside the block each call has its own workers"



def test_an_interrupted_block_ends_the_workers_of_every_pool_of_its_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a collector hook's thread maps on the one-worker pools that follow a
    worker's death: their worker ends with the block (it ran its item to the end, and the exit
    waited for it), and that thread starts no more workers."""
    monkeypatch.setenv(WORKERS_ENV, "2")
    attempts, ended = tmp_path / "attempts", []
    items = [(0, str(tmp_path)), (1, str(tmp_path))]
    hook = threading.Thread(target=lambda: ended.append(_outcome(parallel_tasks.die_when_seen,
                                                                 items)), daemon=True)
    with pytest.raises(KeyboardInterrupt), shared_workers():
        hook.start()
        deadline = time.monotonic() + 60
        while len(_pids(attempts)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_pids(attempts)) == 2, "item 1 never ran on a one-worker pool"
        raise KeyboardInterrupt
    alone = _pids(attempts)[1]
    deadline = time.monotonic() + 10
    while _alive(alone) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(alone), "the one-worker pool's worker outlived the block"
    hook.join(10)
    assert ended, "the hook's thread still maps"
    with shared_workers():  # the main thread and new threads map as ever
        assert [d.value for d in parallel_map(parallel_tasks.env, ["HOME"] * 2)] == [
            os.environ["HOME"]] * 2


def _outcome(fn, items) -> list | BaseException:
    try:
        return list(parallel_map(fn, items, workers=2))
    except BaseException as exc:
        return exc


def _pids(path: Path) -> list[int]:
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


_PRESTART = """
import sys
from multiprocessing import forkserver
sys.path.insert(0, sys.argv[1])
import parallel_tasks
from aorta_core.api.parallel import prestart, parallel_map
prestart("parallel_tasks", min_cores=int(sys.argv[2]))
server = forkserver._forkserver._forkserver_pid
parents = {d.value for d in parallel_map(parallel_tasks.parent_pid, range(4), workers=2)}
print(server, sorted(parents))
"""


def _prestarted(env: dict[str, str], min_cores: int = 3) -> tuple[str, list[int]]:
    done = subprocess.run([sys.executable, "-c", _PRESTART, str(Path(__file__).parent),
                           str(min_cores)],
                          capture_output=True, text=True, timeout=120, env=env, check=True)
    server, parents = done.stdout.split(" ", 1)
    return server, json.loads(parents)


@pytest.mark.skipif(usable_cores() < 3, reason="needs 3 or more usable cores: on fewer, "
                    "prestart leaves the server to the first pool")
def test_prestart_starts_the_server_that_forks_the_workers() -> None:
    server, parents = _prestarted(dict(os.environ, **{WORKERS_ENV: ""}))
    assert server != "None" and parents == [int(server)]


@pytest.mark.skipif(usable_cores() < 2, reason="needs 2 or more usable cores for a pool")
def test_prestart_asks_for_fewer_cores_where_its_server_imports_much() -> None:
    anywhere = dict(os.environ, **{WORKERS_ENV: ""})
    server, parents = _prestarted(anywhere, min_cores=2)
    assert server != "None" and parents == [int(server)]
    server, _ = _prestarted(anywhere, min_cores=usable_cores() + 1)
    assert server == "None"


def test_prestart_starts_nothing_where_no_pool_would_run() -> None:
    server, parents = _prestarted(dict(os.environ, **{WORKERS_ENV: "1"}))
    # AORTA_WORKERS=1: no server; the items ran in that process (whose parent is this one)
    assert server == "None" and parents == [os.getpid()]


@pytest.mark.parametrize("workers", [1, 2])
def test_tasks_run_without_the_cyclic_collector_which_comes_back_after(workers: int) -> None:
    assert gc.isenabled()
    assert [d.value for d in parallel_map(parallel_tasks.collecting, range(3),
                                          workers=workers)] == [False] * 3
    assert gc.isenabled()
