"""Device slots of parallel cells: exclusive between processes and between threads of one
process, and never kept by a daemon that a collector hook forked. Needs: Linux, any CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from aorta_core.engine.slots import device_slot


def test_threads_of_one_process_never_share_a_slot(tmp_path: Path):
    inside, most = [], []
    guard = threading.Lock()

    def cell() -> None:
        with device_slot(tmp_path, ["0", "1"], 1, ["CUDA_VISIBLE_DEVICES"]) as env:
            with guard:
                inside.append(env["CUDA_VISIBLE_DEVICES"])
                most.append(sorted(inside))
            time.sleep(0.05)
            with guard:
                inside.remove(env["CUDA_VISIBLE_DEVICES"])

    threads = [threading.Thread(target=cell) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(len(now) == len(set(now)) <= 2 for now in most), most


def test_a_forked_daemon_does_not_keep_the_slot_after_its_parent_is_killed(tmp_path: Path):
    holder = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from aorta_core.engine.slots import device_slot
        with device_slot(Path({str(tmp_path)!r}), ["0"], 1, ["CUDA_VISIBLE_DEVICES"]):
            child = os.fork()
            if child == 0:  # what a hook's daemon does: keeps every descriptor
                os.setsid()
                time.sleep(30)
                os._exit(0)
            print(child, flush=True)
            time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    daemon = None
    try:
        daemon = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        got: list[str] = []
        taker = threading.Thread(target=lambda: got.append(_take(tmp_path)), daemon=True)
        taker.start()
        taker.join(5)
        assert got == ["0"], "the slot stayed taken after its holder was killed"
    finally:
        proc.kill()
        if daemon is not None:
            os.kill(daemon, signal.SIGKILL)


def _take(output: Path) -> str:
    with device_slot(output, ["0"], 1, ["CUDA_VISIBLE_DEVICES"]) as env:
        return env["CUDA_VISIBLE_DEVICES"]
