"""``aorta diagnose`` against ground truth: real gloo ranks on the CPU, one rank slowed by the
benchmark's ``inject.*`` (or by a plain script), and the diagnosis must name that rank, the kind
of time injected, and about as many ms as were injected; with nothing injected, no straggler.

Benchmark runs profile steps 2-7 with its own profiling block (the diagnosis uses 2-6: the last
profiled step is left out, as HTA does) into ``<trial>/benchmark``, where ``aorta diagnose``
finds them as it would in a sweep's trial; the sweep tests run the real sweep with
``collector=torchprof diagnose=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from needs import NO_GPU, needs
from reports.report_helpers import CLOCK_5X, aorta

from aorta_core.reports.diagnose import PARTS

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
HTA_TRACES = Path(__file__).parent / "fixtures" / "hta_trace_filter"
COMPILED_TRACES = Path(__file__).parent / "fixtures" / "compiled_cpu"
PROFILES_ITSELF = (Path(__file__).resolve().parents[2] / "examples" / "diagnose"
                   / "train_profiled.py")
H200_TRACE = (Path(__file__).resolve().parents[2] / "plugins" / "aorta_torchprof" / "tests"
              / "fixtures" / "cuda_h200" / "torchprof" / "rank0.step5.pt.trace.json")
#: The tiny model under DDP, 8 steps; the profiler records steps 2-7.
BENCH = ["device=cpu", "parallel=ddp", "training.max_steps=8", "data.batch_size=2",
         "data.sequence_length=4", "profiling.enabled=true", "profiling.wait=0",
         "profiling.warmup=2", "profiling.active=6", "telemetry.matmul_reference=false"]
#: Per step on the slowed rank: well above the CPU's noise (a rank's own time per step varies
#: by about 10 ms on 2 shared cores), so that 20 % of it is a fair test.
INJECTED_MS = 100.0


def _env() -> dict[str, str]:
    """CPU runs on any machine: a GPU host's `auto` would take its GPU (and one rank)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
    return {**env, **NO_GPU, "OMP_NUM_THREADS": "1", "AORTA_REPORT_PNG": "0"}


def _bench_trial(trial: Path, *overrides: str, nproc: int = 2) -> dict:
    """A benchmark run as a trial folder, then ``aorta diagnose`` on it; its diagnosis.json."""
    proc = subprocess.run([TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m",
                           "aorta_core.benchmark", *BENCH, f"output_dir={trial / 'benchmark'}",
                           *overrides], env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = aorta("diagnose", str(trial), cwd=trial, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads((trial / "diagnosis.json").read_text())


def _check_sums(diagnosis: dict) -> None:
    for rank in diagnosis["ranks"].values():
        for step in rank["steps"]:
            parts = sum(step[f"{p}_ms"] for p in PARTS)
            assert parts == pytest.approx(step["step_ms"], abs=0.01), step
            assert 0 <= step["comm_wait_ms"] <= step["comm_exposed_ms"] + 0.001, step


def _close(found: float, injected: float) -> bool:
    """Within 20 % or 5 ms of what was injected (issue 25)."""
    return abs(found - injected) <= max(0.2 * injected, 5.0)


def _predicts(found: dict, clean: dict) -> None:
    """The what-if of a run with an injected straggler: the replay gives the measured step back
    (within 15 %), removes the injected ms (within 20 % or 5 ms: the benchmark's JSONL states
    them, in the same run) and lands near the step of a clean run (within half of it: two runs
    on 2 shared cores differ by up to a third, bench/proof_what_if.py measures the accuracy); a
    clean run claims < 10 % recoverable from stragglers (issue 43: 4 ranks on 2 shared cores
    take turns, and one may trail by a few ms, 2.9 of 42 seen), and evening out a part < 25 %."""
    what, (injected,) = found["what_if"], found["injected"][str(found["stragglers"][0]["rank"])
                                                            ].values()
    assert abs(what["replayed_step_ms"] - what["step_ms"]) <= 0.15 * what["step_ms"], what
    assert _close(what["recoverable_ms"], injected), (what, injected)
    truth = clean["what_if"]["step_ms"]
    assert abs(what["step_ms_without_stragglers"] - truth) <= 0.5 * truth + 2.0, (what, truth)
    assert what["text"].startswith(
        f"without rank {found['stragglers'][0]['rank']}'s excess the step would take "
        f"{what['step_ms_without_stragglers']:.1f} ms instead of {what['step_ms']:.1f}")
    claimed = max(v["recoverable_ms"] for v in clean["what_if"]["per_op_type"].values())
    assert clean["what_if"]["recoverable_ms"] < 0.1 * truth and claimed < 0.25 * truth, \
        clean["what_if"]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> dict:
    return _bench_trial(tmp_path_factory.mktemp("baseline"))


def test_nothing_injected_names_no_straggler(baseline):
    assert len(baseline["ranks"]) == 2
    assert baseline["steps"] == [2, 3, 4, 5, 6]
    _check_sums(baseline)
    assert baseline["stragglers"] == []
    assert all(f["rank"] is None for f in baseline["findings"])
    assert baseline["injected"] == {}
    assert baseline["clock_corrections"] == {}
    means = [r["mean"] for r in baseline["ranks"].values()]
    assert all(m["compute_ms"] > 0 and m["comm_exposed_ms"] > 0 for m in means)


@pytest.mark.parametrize(("overrides", "category"), [
    ((f"inject.host_ms={INJECTED_MS}",), "host"),
    ((f"inject.host_ms={INJECTED_MS}", "inject.host_mode=burn"), "host"),
    ((f"inject.data_ms={INJECTED_MS}",), "data"),
    ((f"inject.compute_ms={INJECTED_MS}",), "compute"),
    ((f"inject.collective_ms={INJECTED_MS}",), "host"),
], ids=["host-sleep", "host-burn", "data", "compute", "collective"])
def test_an_injected_rank_is_named_with_its_category_and_ms(tmp_path, baseline, overrides,
                                                            category):
    found = _bench_trial(tmp_path, "inject.rank=1", *overrides)
    _check_sums(found)
    assert [s["rank"] for s in found["stragglers"]] == [1], found["stragglers"]
    straggler = found["stragglers"][0]
    assert straggler["category"] == category
    assert _close(straggler["excess_ms_per_step"], INJECTED_MS), straggler
    assert _close(straggler["by_category_ms"][category], INJECTED_MS), straggler
    assert straggler["waiting_ranks"] == [0]
    assert straggler["waited_in"] == ["gloo:all_reduce"]
    (kind,) = found["injected"]["1"]
    assert _close(found["injected"]["1"][kind], INJECTED_MS)
    if "inject.collective_ms" in overrides[0]:  # a late arrival: the gap ends at the collective
        assert straggler["host_gap_before"].startswith("c10d::")
    assert any(f["text"].startswith(f"rank 1 is {straggler['excess_ms_per_step']:.1f} ms/step "
                                    "slower") for f in found["findings"])
    _predicts(found, baseline)


def test_three_ranks_wait_for_the_one_that_sleeps(tmp_path):
    """4 ranks, the one slowed sleeps; the what-if holds against a clean 4-rank run."""
    found = _bench_trial(tmp_path / "slow", "inject.rank=2", f"inject.host_ms={INJECTED_MS}",
                         nproc=4)
    _check_sums(found)
    assert [s["rank"] for s in found["stragglers"]] == [2], found["stragglers"]
    straggler = found["stragglers"][0]
    assert straggler["category"] == "host"
    assert _close(straggler["excess_ms_per_step"], INJECTED_MS), straggler
    assert straggler["waiting_ranks"] == [0, 1, 3]
    _predicts(found, _bench_trial(tmp_path / "clean", nproc=4))


def test_the_cli_takes_a_sweep_and_refuses_what_is_none(tmp_path, baseline):
    trial = Path(baseline["trial"])
    done = aorta("diagnose", str(trial), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    (again,) = json.loads(done.stdout)
    assert again["ranks"] == baseline["ranks"]
    done = aorta("diagnose", str(trial), cwd=tmp_path, check=False)
    assert f"  - what if: {baseline['what_if']['text']}\n" in done.stdout
    assert baseline["what_if"]["text"].startswith("no straggler; with every rank's ")
    empty = tmp_path / "empty"
    empty.mkdir()
    done = aorta("diagnose", str(empty), cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert "no Kineto trace with ProfilerStep#N ranges" in done.stderr
    done = aorta("diagnose", str(tmp_path / "missing"), cwd=tmp_path, check=False)
    assert done.returncode == 2 and "is not a folder" in done.stderr
    done = aorta("diagnose", str(trial), "--min-excess-ms", "-1", cwd=tmp_path, check=False)
    assert done.returncode == 2 and "must be >= 0, e.g. 5 (the default)" in done.stderr
    done = aorta("diagnose", str(trial), "--min-excess-pct", "-3", cwd=tmp_path, check=False)
    assert done.returncode == 2 and "must be >= 0, e.g. 10 (the default)" in done.stderr
    done = aorta("diagnose", str(trial), "--bogus", cwd=tmp_path, check=False)
    assert done.returncode == 2  # one line, pointing to the tool's own usage
    assert done.stderr == ("aorta: error: aorta diagnose: unrecognized arguments: --bogus; see "
                           "aorta diagnose --help\n")


def test_a_trace_profiled_without_a_schedule_is_named_with_the_fix(tmp_path):
    """torch.profiler.profile without a schedule writes no ProfilerStep#N, even with
    prof.step() (torch records steps only under a schedule): the line says so, not 'profile
    the run', which it was."""
    folder = tmp_path / "run"
    folder.mkdir()
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.randn(64, 64)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                x @ x
                prof.step()
        prof.export_chrome_trace({str(folder / "rank0.pt.trace.json")!r})
        """)], env=_env(), check=True, capture_output=True, timeout=120)
    done = aorta("diagnose", str(folder), cwd=tmp_path, check=False)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line == (f"aorta: warning: {folder}: its 1 Kineto trace(s) (rank0.pt.trace.json) "
                    "hold no ProfilerStep#N ranges to diagnose; profile with a schedule "
                    "(torch.profiler.profile(schedule=torch.profiler.schedule(...))) and call "
                    "prof.step() once per training step, as collector=torchprof does")


TORCHPROF = needs("aorta_torchprof")


@TORCHPROF
def test_a_sweep_with_diagnose_writes_each_trials_diagnosis_and_perf_md(tmp_path):
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "trials=1", "collector=torchprof", "diagnose=true",
                 "collector.torchprof.wait=0", "collector.torchprof.warmup=2",
                 "collector.torchprof.active=6", "workload.steps=9", "workload.inject.rank=1",
                 f"workload.inject.compute_ms={INJECTED_MS}", cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    paths = sorted(out.glob("cells/*/trial_000/diagnosis.json"))
    assert len(paths) == 2  # the default recipe's FSDP2 and DDP cells
    for path in paths:
        found = json.loads(path.read_text())
        assert all("torchprof/" in s for r in found["ranks"].values() for s in r["sources"])
        assert [s["rank"] for s in found["stragglers"]] == [1], (path, found["stragglers"])
        assert found["stragglers"][0]["category"] == "compute", found["stragglers"]
        assert _close(found["stragglers"][0]["excess_ms_per_step"], INJECTED_MS), found[
            "stragglers"]
    perf = (out / "perf.md").read_text()
    assert "## Diagnosis (aorta diagnose)" in perf
    assert perf.count("rank 1: +") == 2
    assert perf.count(": what if: without rank 1's excess the step would take ") == 2
    # its rows name the cells as the main table does: what tells them apart, within 40 chars
    full = [c["cell"] for c in json.loads((out / "matrix.json").read_text())["cells"]]
    named = [line.split("|")[1].strip() for line in perf.split("## Diagnosis")[1].splitlines()
             if "rank 1: +" in line and line.startswith("|")]
    assert len(set(named)) == 2 and all(len(n) <= 40 or n in full for n in named), named
    report = (out / "report.html").read_text()  # the same section
    assert ">Diagnosis (aorta diagnose)</h2>" in report
    assert report.count("rank 1: +") == 2
    assert report.count("what if: without rank 1&#x27;s excess") == 2
    # the sweep given by a relative path, as typed in its parent folder: the collector's traces
    # are found relative to each trial (they were looked for under the path twice)
    again = aorta("diagnose", out.name, "--json", cwd=out.parent, check=False)
    assert again.returncode == 0 and "unreadable" not in again.stderr, again.stderr
    assert [d["stragglers"][0]["rank"] for d in json.loads(again.stdout)] == [1, 1]
    # a trial whose diagnosis cannot be written costs one line and exit 1, not the other's
    blocked = paths[0]
    blocked.unlink()
    blocked.mkdir()
    again = aorta("diagnose", str(out), "--json", cwd=tmp_path, check=False)
    assert again.returncode == 1
    (line,) = [ln for ln in again.stderr.splitlines() if "error" in ln]
    assert line.startswith(f"aorta: error: cannot diagnose {blocked.parent}: IsADirectoryError")
    assert [d["stragglers"][0]["rank"] for d in json.loads(again.stdout)] == [1]


def test_the_end_summary_of_many_diagnosed_cells_stays_short(tmp_path):
    """Nine cells whose payload leaves real traces (fixtures/compiled_cpu) in its trial folder:
    one line each for the first eight, no findings quoted, the ninth counted."""
    copy = ("import os, shutil; shutil.copytree(" + repr(str(COMPILED_TRACES))
            + ", os.path.join(os.environ['AORTA_TRIAL_DIR'], 'profile'))")
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "sweep=repeat", "trials=1", "diagnose=true",
                 "+env.X=" + ",".join(map(str, range(1, 10))), "--", sys.executable, "-c", copy,
                 cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    digest = done.stderr.split("diagnosis (each trial's diagnosis.json; docs/diagnose.md)\n")[1]
    lines = digest.splitlines()
    for x, line in enumerate(lines[:8], start=1):
        found = json.loads((out / f"cells/env.X={x}/trial_000/diagnosis.json").read_text())
        (straggler,) = found["stragglers"]
        assert line.startswith(f"  env.X={x}: step "), line
        assert line.endswith(f"; straggler rank 1 (compute, +{straggler['excess_ms_per_step']:.1f}"
                             " ms/step) in 1/1 trial(s)"), line
    assert lines[8] == "  … 1 more cell(s): perf.md's Diagnosis section has every trial"
    assert lines[9].startswith("wrote ")


#: Not the benchmark: a plain DDP-less loop that all-reduces its gradients by hand, reading its
#: batches through a DataLoader whose dataset is slow on rank 1.
SCRIPT = """
import time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()

class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if rank == 1:
            time.sleep({ms} / 1e3)
        return torch.randn(16)

model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, x in enumerate(torch.utils.data.DataLoader(Slow(), batch_size=1, num_workers=0)):
    loss = model(x).square().sum()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()
    if i == 10:
        break
dist.destroy_process_group()
"""


@TORCHPROF
def test_any_payload_a_script_with_a_slow_data_loader(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT.format(ms=INJECTED_MS)))
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "sweep=repeat", "trials=1", "collector=torchprof",
                 "diagnose=true", "collector.torchprof.wait=0", "collector.torchprof.warmup=2",
                 "collector.torchprof.active=6", "--", TORCHRUN, "--standalone",
                 "--nproc_per_node=2", str(script), cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("cells/*/trial_000/diagnosis.json")
    found = json.loads(path.read_text())
    _check_sums(found)
    assert found["injected"] == {}
    assert [s["rank"] for s in found["stragglers"]] == [1], found["stragglers"]
    straggler = found["stragglers"][0]
    assert straggler["category"] == "data"
    assert _close(straggler["excess_ms_per_step"], INJECTED_MS), straggler
    assert straggler["waiting_ranks"] == [0]
    # the end summary gives the cell's digest and its finding, before the files it wrote
    digest = done.stderr.split("diagnosis (each trial's diagnosis.json; docs/diagnose.md)\n")[1]
    cell, finding, after = digest.splitlines()[:3]
    assert cell.endswith(f"; straggler rank 1 (data, +{straggler['excess_ms_per_step']:.1f} "
                         "ms/step) in 1/1 trial(s)"), cell
    assert finding == f"    {found['findings'][0]['text']}"
    assert after.startswith("wrote ")


def test_any_payload_a_script_that_profiles_itself(tmp_path):
    """examples/diagnose/train_profiled.py: no collector, no benchmark; its own torch.profiler
    writes into the trial's folder, with tensorboard_trace_handler's names (no rank in them)."""
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "sweep=repeat", "trials=1", "diagnose=true", "--", TORCHRUN,
                 "--standalone", "--nproc_per_node=2", str(PROFILES_ITSELF), "--slow-rank", "1",
                 "--slow-ms", str(INJECTED_MS), cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("cells/*/trial_000/diagnosis.json")
    found = json.loads(path.read_text())
    _check_sums(found)
    assert found["steps"] == [2, 3, 4, 5, 6]
    assert all(s.startswith("profile/") for r in found["ranks"].values()
               for s in r["sources"])
    # the cell's folder given: its trials, each on its own (never one mixed diagnosis of them)
    cell = aorta("diagnose", str(path.parents[1]), "--json", cwd=tmp_path, check=False)
    assert cell.returncode == 0, cell.stderr
    assert [d["trial"] for d in json.loads(cell.stdout)] == [found["trial"]]
    assert [s["rank"] for s in found["stragglers"]] == [1], found["stragglers"]
    straggler = found["stragglers"][0]
    assert straggler["category"] == "host"
    assert _close(straggler["excess_ms_per_step"], INJECTED_MS), straggler
    assert straggler["waiting_ranks"] == [0]


def test_a_gpu_job_s_traces_nccl_kernels_and_copies(tmp_path):
    """Real Kineto traces of 2 ranks of a 128-rank NCCL job (HTA's test data), diagnosed as the
    folder they come in (no trial, no record): kernels are classified as HTA does, the parts sum
    to the step, the last step is left out; the timeline written beside them is not taken for a
    third rank's trace."""
    folder = tmp_path / "traces"
    shutil.copytree(HTA_TRACES, folder)
    done = aorta("diagnose", str(folder), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)
    assert found["steps"] == [551]
    _check_sums(found)
    assert {r: v["sources"] for r, v in found["ranks"].items()} == {
        "0": ["sampled_rank-0.json.gz"], "1": ["sampled_rank-1.json.gz"]}
    for rank in found["ranks"].values():
        (step,) = rank["steps"]
        assert rank["device"] == "gpu"
        assert step["compute_ms"] > 0 and step["other_ms"] > 0  # GEMMs; memcpy/memset
        assert step["comm_hidden_ms"] + step["comm_exposed_ms"] > 0  # ncclKernel_*
        assert step["data_ms"] == 0
    assert max(r["steps"][0]["comm_wait_ms"] for r in found["ranks"].values()) > 0
    assert found["stragglers"] == []
    assert aorta("timeline", str(folder), cwd=tmp_path, check=False).returncode == 0
    again = aorta("diagnose", str(folder), "--json", cwd=tmp_path, check=False)
    assert again.returncode == 0, again.stderr
    # the job had 128 ranks (distributedInfo.world_size): the others are said, in one line
    (line,) = [ln for ln in again.stderr.splitlines() if "warning" in ln]
    assert line == ("aorta: warning: ranks 2-127 of the job: no readable trace with profiled "
                    "steps here; the diagnosis covers ranks 0 and 1 only, and counts the "
                    "waiting for ranks 2-127 as exposed communication")
    assert json.loads(again.stdout)[0]["ranks"] == found["ranks"]
    assert found["left_out_ranks"] == list(range(2, 128))


def test_a_folder_of_traces_says_what_it_skips(tmp_path):
    """A link and a cut .gz among the traces of a folder cost one line each, never silence."""
    folder = tmp_path / "traces"
    folder.mkdir()
    good, other = sorted(HTA_TRACES.iterdir())
    shutil.copy(good, folder)
    (folder / "rank1.json.gz").symlink_to(other)
    (folder / "cut_rank-1.json.gz").write_bytes(other.read_bytes()[:50_000])
    done = aorta("diagnose", str(folder), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{folder}/rank1.json.gz: skipped, a link (aorta reads no links" in done.stderr
    assert f"{folder}/cut_rank-1.json.gz: skipped, unreadable" in done.stderr
    assert "ranks 1-127 of the job: no readable trace with profiled steps here; the diagnosis " \
        "covers rank 0 only" in done.stderr
    assert list(json.loads(done.stdout)[0]["ranks"]) == ["0"]


def test_two_runs_in_one_folder_are_told_apart(tmp_path):
    """Real traces of two runs (fixtures compiled_cpu, ProfilerStep#1-#5, and kineto_clock_5x,
    #2-#7) under one folder: the second run's files share step numbers at other times, so they
    are skipped with one line each naming them, never merged into the first run's ranks."""
    folder = tmp_path / "mix"
    shutil.copytree(COMPILED_TRACES, folder / "a", ignore=shutil.ignore_patterns("*.py", "*.md"))
    shutil.copytree(CLOCK_5X / "benchmark" / "torch_profiler", folder / "b")
    done = aorta("diagnose", str(folder), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    skipped = [ln for ln in done.stderr.splitlines() if "another run's" in ln]
    assert len(skipped) == 2, done.stderr
    for rank, line in enumerate(sorted(skipped)):
        assert line.startswith(f"aorta: warning: {folder}/b/rank{rank}/rank{rank}.step8.pt."
                               "trace.json.gz: skipped, another run's: its ProfilerStep#2-#5 "
                               "lie at other times than in a/vm_"), line
        assert line.endswith("; diagnose each run's traces in a folder of their own"), line
    (found,) = json.loads(done.stdout)
    assert all(s.startswith("a/") for r in found["ranks"].values() for s in r["sources"])
    assert found["steps"] == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def host_bound_rank_1(tmp_path_factory) -> Path:
    trial = tmp_path_factory.mktemp("host_bound") / "trial"
    _bench_trial(trial, "inject.rank=1", f"inject.host_ms={INJECTED_MS}")
    return trial


def _traces(trial: Path, rank: int) -> list[Path]:
    return sorted((trial / "benchmark" / "torch_profiler" / f"rank{rank}").iterdir())


def test_a_rank_whose_trace_is_cut_is_left_out_and_said(tmp_path, host_bound_rank_1):
    """Rank 1 sleeps each step and rank 0 waits for it in all_reduce; with rank 1's trace cut
    short, rank 0's waiting cannot be told from exposed communication: the diagnosis says which
    rank is left out, names no straggler, and its finding says what the time may be."""
    trial = tmp_path / "trial"
    shutil.copytree(host_bound_rank_1, trial)
    (trial / "diagnosis.json").unlink()
    (cut,) = _traces(trial, 1)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    done = aorta("diagnose", str(trial), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{cut}: skipped, " in done.stderr
    assert ("rank 1 of the job: no readable trace with profiled steps here; the diagnosis covers "
            "rank 0 only, and counts the waiting for rank 1 as exposed communication"
            ) in done.stderr
    (found,) = json.loads(done.stdout)
    assert found["left_out_ranks"] == [1] and list(found["ranks"]) == ["0"]
    assert found["stragglers"] == []
    (comm,) = [f for f in found["findings"] if f["category"] == "comm_exposed"]
    assert comm["text"].startswith("exposed communication, perhaps waiting for rank 1, takes ")
    assert comm["text"].endswith("on rank 0 (rank 1 left out)")
    assert _close(comm["ms_per_step"], INJECTED_MS), comm
    assert not any("every rank" in f["text"] for f in found["findings"])


def test_a_trial_whose_traces_are_all_cut_says_so_and_keeps_its_diagnosis(tmp_path,
                                                                         host_bound_rank_1):
    trial = tmp_path / "trial"
    shutil.copytree(host_bound_rank_1, trial)
    before = (trial / "diagnosis.json").read_bytes()
    for rank in (0, 1):
        for path in _traces(trial, rank):
            path.write_bytes(path.read_bytes()[:1000])
    done = aorta("diagnose", str(trial), cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"aorta: warning: {trial}: none of its 2 Kineto trace(s) could be read (the lines above "
        "say why); the diagnosis.json already there is kept; profile the run again")
    assert (trial / "diagnosis.json").read_bytes() == before


def test_a_trial_that_did_not_run_says_so_in_one_line(tmp_path):
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "sweep=repeat", "trials=1", "--", str(tmp_path / "nothing"),
                 cwd=tmp_path, env=_env())
    (trial,) = out.glob("cells/*/trial_000")
    done = aorta("diagnose", str(out), cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"aorta: warning: {trial}: the trial did not run (cannot start "
        f"'{tmp_path / 'nothing'}': No such file or directory); nothing to diagnose"]
    parent = aorta("diagnose", str(tmp_path), cwd=tmp_path, check=False)
    assert parent.returncode == 1
    assert (f"aorta: warning: {tmp_path}: 1 trial folder(s) inside it (first: "
            "sweep/cells/default/trial_000) are other runs and not read with it; give a "
            "sweep's output, a cell's or a trial's folder to read those") in parent.stderr


def test_a_failed_trial_without_traces_says_it_failed_and_why(tmp_path):
    out = tmp_path / "sweep"
    aorta(f"output={out}", "sweep=repeat", "trials=1", "--", sys.executable, "-c",
          "raise SystemExit('boom')", cwd=tmp_path, env=_env())
    (trial,) = out.glob("cells/*/trial_000")
    done = aorta("diagnose", str(out), cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"aorta: warning: {trial}: the trial failed (exit code 1: boom); {trial}/stderr.log has "
        "the whole error",
        f"aorta: warning: {trial}: the failed trial left no Kineto trace with ProfilerStep#N "
        "ranges to diagnose; fix its failure, then run it again"]


def test_a_diagnose_sweep_of_a_failing_payload_names_the_failure_once(tmp_path):
    """With diagnose=true the trial's own line says it failed and why; the diagnosis adds only
    that it left nothing to diagnose, not how to profile a run."""
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "sweep=repeat", "trials=1", "diagnose=true", "--",
                 sys.executable, "-c", "raise SystemExit('boom')", cwd=tmp_path, env=_env())
    assert done.returncode == 1
    (trial,) = out.glob("cells/*/trial_000")
    said, trial_line = [ln for ln in done.stderr.splitlines() if "Kineto" in ln or "boom" in ln]
    assert said == (f"aorta: warning: {trial}: the failed trial left no Kineto trace with "
                    "ProfilerStep#N ranges to diagnose; fix its failure, then run it again")
    assert trial_line.startswith("  default trial 1/1 fail ")
    assert trial_line.endswith(" s  exit code 1: boom")


#: examples/diagnose/train_profiled.py's loop, then a failure after its profiled steps. It ends
#: as that script does, without torch's C++ teardown: on the CPU that aborts now and then
#: ("terminate called without an active exception"), and the trial would fail of SIGABRT instead.
FAILS_AFTER_PROFILING = f"""
import os, sys
sys.path.insert(0, {str(PROFILES_ITSELF.parent)!r})
from train_profiled import main
main()
print("failed after the profiled steps", file=sys.stderr, flush=True)
os._exit(1)
"""


def test_a_failed_trial_with_traces_says_it_failed_then_diagnoses_them(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(FAILS_AFTER_PROFILING)
    out = tmp_path / "sweep"
    aorta(f"output={out}", "sweep=repeat", "trials=1", "--", TORCHRUN, "--standalone",
          "--nproc_per_node=2", str(script), cwd=tmp_path, env=_env())
    (trial,) = out.glob("cells/*/trial_000")
    record = json.loads((trial / "record.json").read_text())
    assert record["verdict"] == "fail" and "failed after the profiled steps" in record["error"]
    done = aorta("diagnose", str(trial), cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr  # it diagnosed what the trial left
    failed = (f"{trial}: the trial failed ({record['error']}); {trial}/stderr.log has the "
              "whole error")
    assert done.stderr.splitlines()[0] == f"aorta: warning: {failed}"
    assert done.stdout.startswith(f"{trial}: 2 rank(s), profiled steps 2, 3, 4, 5, 6\n")
    assert json.loads((trial / "diagnosis.json").read_text())["warnings"][0] == failed


@TORCHPROF
def test_traces_deleted_by_retention_are_named_as_the_cause(tmp_path):
    """``retain.on_pass=log`` deletes the collector's folder after ``diagnose=true`` diagnosed
    it: diagnosing again says why no trace is left, and keeps the sweep's diagnosis."""
    out = tmp_path / "sweep"
    done = aorta(f"output={out}", "trials=1", "collector=torchprof", "diagnose=true",
                 "retain.on_pass=log", "workload.parallel=ddp", "collector.torchprof.wait=0",
                 "collector.torchprof.warmup=1", "collector.torchprof.active=3",
                 "workload.steps=6", cwd=tmp_path, env=_env())
    assert done.returncode == 0, done.stderr
    (trial,) = out.glob("cells/*/trial_000")
    assert not (trial / "torchprof").exists()
    before = (trial / "diagnosis.json").read_bytes()
    done = aorta("diagnose", str(trial), cwd=tmp_path, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"aorta: warning: {trial}: its traces were deleted after the run by its retention "
        "(level log, 1 path(s)); the diagnosis.json already there is kept; keep them with "
        "retain.on_pass=full, or diagnose during the sweep with diagnose=true"]
    assert (trial / "diagnosis.json").read_bytes() == before


def test_compiled_kernels_on_the_cpu_are_compute(tmp_path):
    """Real traces (fixtures/compiled_cpu/capture.py): rank 1 runs a torch.compile'd function
    each step, whose fused C++ kernels make no op events; its time is found as compute, about as
    long as rank 1 timed the call itself."""
    folder = tmp_path / "traces"
    shutil.copytree(COMPILED_TRACES, folder)
    done = aorta("diagnose", str(folder), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)
    _check_sums(found)
    timed = json.loads((folder / "extra_ms.json").read_text())["extra_ms_per_step"]
    truth = sum(timed[step] for step in found["steps"]) / len(found["steps"])
    assert [s["rank"] for s in found["stragglers"]] == [1], found["stragglers"]
    straggler = found["stragglers"][0]
    assert straggler["category"] == "compute", straggler
    assert _close(straggler["by_category_ms"]["compute"], truth), (straggler, truth)
    assert straggler["waiting_ranks"] == [0]


def test_a_kineto_clock_that_ran_fast_is_measured_back(tmp_path):
    """Real traces whose Kineto clock ran 4.98x the wall clock (fixtures/PROVENANCE.md): the
    benchmark's own stamps of the same step starts measure it back, so the delayed collective
    is found at its 100 ms, not at 500, and the correction is said."""
    trial = tmp_path / "trial"
    shutil.copytree(CLOCK_5X, trial)
    done = aorta("diagnose", str(trial), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)
    assert sorted(found["clock_corrections"]) == ["0", "1"]
    assert all(c["rate"] == pytest.approx(4.98, abs=0.01)
               for c in found["clock_corrections"].values())
    assert "rank 1: its Kineto trace's clock ran 4.98x the wall clock" in done.stderr
    _check_sums(found)
    (straggler,) = found["stragglers"]
    assert (straggler["rank"], straggler["category"]) == (1, "host")
    assert _close(straggler["excess_ms_per_step"], found["injected"]["1"]["collective"])
    step = found["ranks"]["1"]["steps"][0]["step_ms"]
    assert step == pytest.approx(109, abs=5)  # the JSONL's step_time_ms: 108.6-109.3


def test_odd_events_cost_nothing_but_themselves(tmp_path):
    """Events without a name or a duration, with a negative duration, and lanes named by text
    (as Kineto writes for its own spans) are passed over; the rest is diagnosed."""
    folder = tmp_path / "trial" / "benchmark" / "torch_profiler"
    folder.mkdir(parents=True)
    for rank in (0, 1):
        events = [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
             "tid": 1, "ts": 1000.0 * n, "dur": 1000.0} for n in (1, 2, 3)]
        events += [
            {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1100.0, "dur": 50.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1200.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1300.0,
             "dur": -5.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2100.0,
             "dur": 300.0},
            {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
             "tid": "PyTorch Profiler", "ts": 900.0, "dur": 3000.0},
        ]
        (folder / f"rank{rank}.pt.trace.json").write_text(json.dumps(
            {"distributedInfo": {"rank": rank}, "traceEvents": events}))
    done = aorta("diagnose", str(tmp_path / "trial"), "--json", cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)
    assert found["steps"] == [1, 2]
    _check_sums(found)
    steps = found["ranks"]["0"]["steps"]
    assert [s["compute_ms"] for s in steps] == [0.0, 0.3]
    assert [s["host_ms"] for s in steps] == [1.0, 0.7]


@pytest.mark.parametrize("ids", [
    [(7, 100), (7, 101), (8, 100), (7, 100), (-1, 2**40)],
    [(7, 100), ("Spans", 1), (8, 100), (7, 100), ("Spans", 1)],  # a named process
    [(2**70, 1), (7, 1), (2**70, 1), (7, 2), (7, 1)],  # past int64
])
def test_threads_are_told_apart_by_pid_and_tid(ids) -> None:
    from aorta_core.reports.diagnose import _Reader, _Span

    reader = _Reader()
    chunks = reader.piece([_Span(ph="X", cat="cpu_op", name="aten::mm", ts=float(i), dur=1.0,
                                 pid=pid, tid=tid) for i, (pid, tid) in enumerate(ids)])
    codes = reader.columns(chunks).thread.tolist()
    assert [codes.index(c) for c in codes] == [ids.index(i) for i in ids]


def test_a_trace_read_in_pieces_gives_the_columns_of_its_whole_decode() -> None:
    """The real H200 trace cut into ~40 pieces: codes shared across the pieces, the same
    columns and the same reading of the file as one decode of it all."""
    import numpy as np

    from aorta_core.api import decode_pieces
    from aorta_core.reports import diagnose

    text = H200_TRACE.read_bytes()
    whole = diagnose._Reader()
    expected = whole.columns(whole.piece(diagnose._DECODER.decode(text).traceEvents))
    cut = diagnose._Reader()
    done = decode_pieces(text, diagnose._DECODER, diagnose._SPANS, cut.piece, 4096)
    assert done is not None and len(done[1]) > 30
    got = cut.columns(done[1])
    for column in ("ts", "end", "kind", "cpu", "c10d", "thread"):
        np.testing.assert_array_equal(getattr(got, column), getattr(expected, column))
    everything = np.ones(len(expected.ts), bool)
    assert got.names(everything) == expected.names(everything)
    assert len(expected.ts) > 300 and expected.cpu.any() and not expected.cpu.all()
    mine = diagnose._read_one(got, diagnose._steps(got))
    theirs = diagnose._read_one(expected, diagnose._steps(expected))
    assert mine.steps == theirs.steps != {} and mine.collectives == theirs.collectives
    np.testing.assert_array_equal(mine.compute, theirs.compute)
