"""aorta-pyinstrument in real sweeps, as installed: a Python script, two torchrun ranks, an
asyncio program and a command it cannot profile. Any machine: the workloads run on the CPU
(gloo), GPU or not."""

import sys
from pathlib import Path

#: Two functions that only count, the first 5 times as long: both sampled, busy() the hotter.
BUSY = "".join(f"def {name}():\n    total = 0\n    for i in range({n}):\n        total += i\n"
               f"    return total\n\n\n" for name, n in (("busy", 2_500_000), ("light", 500_000)))
#: Two ranks that meet in an all-reduce on gloo, so that the processes are truly distributed.
DISTRIBUTED = BUSY + """import torch
import torch.distributed as dist

dist.init_process_group("gloo")
busy()
total = torch.ones(1)
dist.all_reduce(total)
assert total.item() == dist.get_world_size()
dist.destroy_process_group()
"""


def _script(tmp_path: Path, text: str) -> str:
    (tmp_path / "work.py").write_text(text)
    return str(tmp_path / "work.py")


def test_a_python_script_is_sampled_and_its_hottest_function_named(aorta_sweep, tmp_path):
    script = _script(tmp_path, BUSY + "busy()\nlight()\n")
    result = aorta_sweep("sweep=repeat", "trials=1", "collector=pyinstrument",
                         "collector.pyinstrument.top=2", "collector.pyinstrument.interval_ms=2",
                         "--", sys.executable, script, collectors=["pyinstrument"]).assert_ok()
    (record,) = result.records
    metrics = record.metrics
    assert record.argv_run == [sys.executable, "-m", "aorta_pyinstrument",
                               metrics["pyinstrument_artifact_dir"], "0.002", script]
    assert metrics["pyinstrument_process_count"] == 1
    assert metrics["pyinstrument_duration_ms"] > 0 and metrics["pyinstrument_cpu_ms"] > 0
    assert metrics["pyinstrument_top_functions"] == ["busy (work.py:1)", "light (work.py:8)"]


def test_every_torchrun_rank_writes_its_own_session(aorta_sweep, tmp_path):
    script = _script(tmp_path, DISTRIBUTED)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    result = aorta_sweep("sweep=repeat", "trials=1", "collector=pyinstrument",
                         "collector.pyinstrument.top=50", "--", *launch, script,
                         collectors=["pyinstrument"], timeout=300).assert_ok()
    (record,) = result.records
    folder = Path(record.metrics["pyinstrument_artifact_dir"])
    assert record.argv_run == [*launch, "-m", "aorta_pyinstrument", str(folder), "0.001", script]
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.pyisession", "rank1.pyisession"]
    assert record.metrics["pyinstrument_process_count"] == 2
    assert "busy (work.py:1)" in record.metrics["pyinstrument_top_functions"]


def test_an_asyncio_workload_is_sampled_on_its_thread_stacks(aorta_sweep, tmp_path):
    """pyinstrument's async mode would end a stack in an "[await]" frame; its thread stacks are
    what a per-process profile shows (the event loop waiting included)."""
    script = _script(tmp_path, "import asyncio\n\n\nasync def spin():\n    total = 0\n"
                     "    for i in range(2_500_000):\n        total += i\n"
                     "    await asyncio.sleep(0.01)\n\n\nasyncio.run(spin())\n")
    result = aorta_sweep("sweep=repeat", "trials=1", "collector=pyinstrument", "--",
                         sys.executable, script, collectors=["pyinstrument"]).assert_ok()
    (record,) = result.records
    assert record.metrics["pyinstrument_top_functions"][0] == "spin (work.py:4)"
    assert record.warnings == {}


def test_a_command_that_is_not_python_is_a_setup_error(aorta_sweep):
    result = aorta_sweep("sweep=repeat", "trials=1", "collector=pyinstrument", "--",
                         "sh", "-c", "true", collectors=["pyinstrument"])
    assert result.returncode == 1, result.failure_message()
    (record,) = result.records
    assert record.verdict == "error"
    assert record.error.endswith("pyinstrument runs `python script.py` or `-m module` "
                                 "(torchrun too); put other commands in a script")
