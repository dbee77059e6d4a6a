"""``aorta timeline`` on the H200 captures committed as fixtures (Kineto, Proton, benchmark JSONL);
see plugins/aorta_torchprof/tests/fixtures/PROVENANCE.md and the Proton fixtures' PROVENANCE.md."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from needs import needs
from reports.report_helpers import H200_JSONL, REPO

from aorta_core.reports.timeline import build_timeline
from aorta_core.reports.timeline_selection import Selection

TORCHPROF = REPO / "plugins/aorta_torchprof/tests/fixtures"
PROTON = REPO / "plugins/aorta_proton/tests/fixtures/h200"


def _trial(tmp_path: Path, fixture: str) -> Path:
    trial = tmp_path / "trial_000"
    shutil.copytree(TORCHPROF / fixture, trial)
    return trial


def _input_events(trial: Path) -> tuple[dict, list[dict]]:
    path = next((trial / "torchprof").rglob("*.json*"))
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
    return doc, [e for e in doc["traceEvents"] if e.get("ph") != "M"]


def _names(doc: dict, kind: str) -> dict[tuple[int, int] | int, str]:
    key = ("pid",) if kind == "process_name" else ("pid", "tid")
    return {tuple(e[k] for k in key) if len(key) > 1 else e["pid"]: e["args"]["name"]
            for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == kind}


@needs("aorta_torchprof")
def test_benchmark_trace_lanes_counts_and_clock(tmp_path):
    """FSDP benchmark, 1 rank, bf16 on the H200: 2124 kernels, 774 memcpys, 48 memsets."""
    trial = _trial(tmp_path, "cuda_h200_bench")
    source, events = _input_events(trial)
    done = build_timeline(trial)
    assert done.ranks == [0] and done.events == {"torchprof": len(events)}
    doc = json.loads(done.path.read_text())
    processes = _names(doc, "process_name")
    assert sorted(processes.values()) == ["rank 0 · torchprof CPU (pid 638)",
                                          "rank 0 · torchprof GPU 0",
                                          "rank 0 · torchprof markers"]  # not GPU 1-15: no events
    gpu = next(pid for pid, name in processes.items() if name.endswith("GPU 0"))
    streams = sorted(n for (pid, _), n in _names(doc, "thread_name").items() if pid == gpu)
    assert streams == ["stream 20 ", "stream 25 ", "stream 32 ", "stream 7 "]
    out = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert Counter(e.get("cat") for e in out) == Counter(e.get("cat") for e in events)
    assert Counter(e.get("cat") for e in out)["kernel"] == 2124
    # the clock: every event lies in the trial's run, as record.json timed it on the H200
    record = json.loads((trial / "record.json").read_text())
    assert doc["otherData"]["origin_unix_ns"] == int(record["started_at_unix"] * 1e9)
    end_us = record["wall_time_s"] * 1e6
    assert all(e["ts"] >= 0 and e["ts"] + e.get("dur", 0) <= end_us for e in out)
    assert doc["otherData"]["sources"][0]["error_bound_ms"] == 0.005
    # CPU and GPU lanes keep Kineto's relation: a kernel starts 6.4 µs after its launch at best
    launches = {e["args"]["correlation"]: e["ts"] for e in out
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    gaps = [e["ts"] - launches[e["args"]["correlation"]] for e in out
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e["args"].get("correlation") in launches]
    assert len(gaps) == 2946 and 6.4 <= min(gaps) <= 6.43
    assert doc["baseTimeNanoseconds"] + round(min(e["ts"] for e in out) * 1000) == \
        source["baseTimeNanoseconds"] + round(min(e["ts"] for e in events) * 1000)


@needs("aorta_torchprof")
def test_steps_select_the_gpu_work_of_a_step(tmp_path):
    trial = _trial(tmp_path, "cuda_h200_bench")
    _, events = _input_events(trial)
    done = build_timeline(trial, tmp_path / "s3.json", Selection(steps=frozenset({3})))
    doc = json.loads(done.path.read_text())
    # step 3's window: its CPU annotation and its projection on the GPU, whichever is wider
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "ProfilerStep#3"]
    low, high = min(a for a, _ in spans), max(b for _, b in spans)
    wanted = [e for e in events if e["ts"] <= high and e["ts"] + e.get("dur", 0) >= low]
    kept = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert len(kept) == len(wanted) < len(events)
    assert sum(e.get("cat") == "kernel" for e in kept) == \
        sum(e.get("cat") == "kernel" for e in wanted) > 600


@needs("aorta_torchprof")
def test_single_gpu_script_trace(tmp_path):
    """train_tiny.py under the runner: 57 kernels, 3 memsets, ProfilerStep#2-#4."""
    trial = _trial(tmp_path, "cuda_h200")
    _, events = _input_events(trial)
    done = build_timeline(trial, tmp_path / "t.json.gz")
    doc = json.loads(gzip.decompress(done.path.read_bytes()))
    out = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert len(out) == len(events) and sum(e.get("cat") == "kernel" for e in out) == 57
    record = json.loads((trial / "record.json").read_text())
    assert all(0 <= e["ts"] <= record["wall_time_s"] * 1e6 for e in out)


@needs("aorta_proton")
def test_proton_trace_is_placed_in_its_trials_run(tmp_path):
    """Proton 3.6 trace of vecadd.py (CLI mode): no absolute time in the file; its record
    (before started_at_unix existed) gives the run: start to the second, plus wall time."""
    trial = tmp_path / "trial_000"
    (trial / "proton").mkdir(parents=True)
    shutil.copy(PROTON / "trace_vecadd.chrome_trace", trial / "proton/proton.chrome_trace")
    shutil.copy(PROTON / "trace_vecadd.record.json", trial / "record.json")
    done = build_timeline(trial)
    assert done.events == {"proton": 40}
    doc = json.loads(done.path.read_text())
    record = json.loads((trial / "record.json").read_text())
    start = int(datetime.fromisoformat(record["started_at"]).timestamp()) * 10**9
    high = start + 10**9 + int(record["wall_time_s"] * 1e9)  # second resolution, then the run
    length = round(686154.856 * 1000)  # first kernel start to last kernel end, in the file
    source = doc["otherData"]["sources"][0]
    assert source["alignment"] == "run_window"
    assert source["first_event_unix_ns"] == start + (high - start - length) // 2
    assert abs(source["error_bound_ms"] - (high - start - length) / 2e6) < 1e-6
    assert doc["otherData"]["origin"] == "record started_at"
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == 40 and all(0 <= e["ts"] <= (high - start) / 1000 for e in kernels)
    assert set(_names(doc, "thread_name").values()) == {"stream 7"}


@needs("aorta_proton")
def test_a_proton_trial_without_a_trace_says_why_it_has_no_lane(tmp_path):
    """Proton 3.6 in its default data=tree (the vecadd capture): kernel totals, no times, so no
    lane; the timeline says so and how to get one, instead of leaving Proton out silently."""
    trial = tmp_path / "trial_000"
    (trial / "proton").mkdir(parents=True)
    shutil.copy(PROTON / "cupti_vecadd.hatchet", trial / "proton/proton.hatchet")
    shutil.copy(PROTON / "cupti_vecadd.record.json", trial / "record.json")
    warned: list[str] = []
    assert build_timeline(trial, warn=warned.append) is None
    assert warned[0] == (
        "proton: no lane on the timeline: this trial recorded data=tree (kernel totals, no "
        "times); run it with collector.proton.data=trace (the same kernel metrics) for one")


def test_gpu_telemetry_becomes_stream_lanes_and_counters(tmp_path):
    """The bf16 H200 run's JSONL (CUDA-event clock): stream lanes, overlap counters, and the
    bound of placing CUDA-event ranges from the host start."""
    trial = tmp_path / "trial_000"
    (trial / "benchmark").mkdir(parents=True)
    shutil.copy(H200_JSONL, trial / "benchmark/rank_00_metrics.jsonl")
    lines = [json.loads(line) for line in H200_JSONL.read_text().splitlines()]
    done = build_timeline(trial)
    expected = sum(3 + len(r["profile"]["ranges"]) for r in lines)  # slice, step, overlap
    assert done.events == {"benchmark": expected}
    doc = json.loads(done.path.read_text())
    assert doc["otherData"]["origin"] == "first benchmark iteration"
    threads = set(_names(doc, "thread_name").values())
    assert {"iterations", "stream compute", "stream aux"} <= threads
    overlap = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "overlap"]
    assert [e["args"]["ratio"] for e in overlap] == [r["overlap_ratio"] for r in lines]
    early = max((r["time_end_unix_ns"] - r["time_start_unix_ns"]) / 1e6 - r["profile"]["total_ms"]
                for r in lines)
    bound = doc["otherData"]["sources"][0]["error_bound_ms"]
    assert abs(bound - early) < 1e-5 and 0 < bound < 5


_MEASURE = """
import json, sys
from pathlib import Path
import concurrent.futures, multiprocessing.connection, pickle  # a worker pool loads these
import aorta_core.reports.rank_alignment, aorta_core.reports.rank_traces  # the alignment
from aorta_core.reports.timeline import build_timeline

def status(key):
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024

before = status("VmRSS")
done = build_timeline(Path(sys.argv[1]), Path(sys.argv[2]), warn=print)
print(json.dumps({"added": status("VmHWM") - before, "ranks": done.ranks}))
"""


def _four_ranks(tmp_path: Path) -> tuple[Path, int]:
    """The H200 benchmark trace as four ranks' (``distributedInfo.rank`` rewritten), no record
    and no telemetry; the size of a rank's file."""
    source = TORCHPROF / "cuda_h200_bench/torchprof/rank0/rank0_step4.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    trial = tmp_path / "trial_000"
    for rank in range(4):
        doc["distributedInfo"]["rank"] = rank
        folder = trial / "torchprof" / f"rank{rank}"
        folder.mkdir(parents=True)
        (folder / f"rank{rank}_step4.pt.trace.json").write_text(json.dumps(doc))
    return trial, len(json.dumps(doc))


@needs("aorta_torchprof")
@pytest.mark.skipif(sys.platform != "linux", reason="reads the peak memory from /proc")
def test_ranks_are_merged_in_workers_so_the_parent_holds_no_decoded_trace(tmp_path):
    """Issue 43: the command's process stays under the largest rank file (merged where it runs,
    a 9 MB trace adds ~4x its size); one worker (``AORTA_WORKERS=1``, in-process) writes the
    same bytes; with no record or telemetry the origin is rank 0's first Kineto event."""
    trial, size = _four_ranks(tmp_path)
    outputs = {}
    for workers in ("4", "1"):
        out = tmp_path / f"timeline_{workers}.json"
        done = subprocess.run([sys.executable, "-c", _MEASURE, str(trial), str(out)],
                              capture_output=True, text=True, timeout=600, check=False,
                              env={**os.environ, "AORTA_WORKERS": workers})
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[workers] = json.loads(done.stdout.splitlines()[-1]), out.read_bytes()
    (parallel, written), (alone, written_alone) = outputs["4"], outputs["1"]
    assert parallel["ranks"] == alone["ranks"] == [0, 1, 2, 3]
    if len(os.sched_getaffinity(0)) > 1:  # one core: parallel_map merges in-process too
        assert parallel["added"] < size / 2, (parallel, alone, size)
        assert alone["added"] > 2 * size, (alone, size)  # the measure sees a decoded rank
    assert written == written_alone
    doc = json.loads(written)
    assert doc["otherData"]["origin"] == "first torchprof event of rank 0"
    names = _names(doc, "process_name")
    per_rank = Counter(name.split(" · ")[0] for name in names.values())
    assert per_rank == dict.fromkeys(("rank 0", "rank 1", "rank 2", "rank 3"), 3)  # each apart


def _marked_trial(tmp_path: Path, shifts_us: list[tuple[float, float]]) -> tuple[Path, int, list]:
    """The vecadd trace as a Proton trial with clock marks on its first and last kernels: the
    k-th window opens ``shifts_us[k][0]`` before the kernel (were time 0 at ``zero``) and closes
    ``shifts_us[k][1]`` after it, as ``aorta_proton.clock_marks`` writes them."""
    trial = tmp_path / "trial_000"
    (trial / "proton").mkdir(parents=True)
    shutil.copy(PROTON / "trace_vecadd.chrome_trace", trial / "proton/proton.chrome_trace")
    shutil.copy(PROTON / "trace_vecadd.record.json", trial / "record.json")
    record = json.loads((trial / "record.json").read_text())
    zero = int(datetime.fromisoformat(record["started_at"]).timestamp()) * 10**9 + 10**9
    events = sorted(json.loads((PROTON / "trace_vecadd.chrome_trace").read_text())["traceEvents"],
                    key=lambda e: e["ts"])
    marked = [events[0], events[-1]]
    with (trial / "proton/proton.marks.jsonl").open("w") as out:
        for event, (before, after) in zip(marked, shifts_us, strict=True):
            out.write(json.dumps({
                "kernel": event["name"],
                "not_before_unix_ns": zero + round((event["ts"] - before) * 1000),
                "not_after_unix_ns": zero + round((event["ts"] + event["dur"] + after) * 1000),
            }) + "\n")
    return trial, zero, events


@needs("aorta_proton")
def test_clock_marks_place_a_proton_trace_on_the_wall_clock(tmp_path):
    """Issue 43: with the session's clock marks beside it, the trace is placed where both marked
    kernels lie in their windows (time 0 within [zero - 10, zero + 30] µs: placed at zero + 10,
    bound 20 µs) instead of centred in the run; the check is listed in clock_checks."""
    trial, zero, events = _marked_trial(tmp_path, [(20.0, 30.0), (10.0, 40.0)])
    done = build_timeline(trial)
    doc = json.loads(done.path.read_text())
    source = doc["otherData"]["sources"][0]
    assert source["alignment"] == "clock_marks"
    assert source["first_event_unix_ns"] == zero + 10_000 + round(events[0]["ts"] * 1000)
    assert source["error_bound_ms"] == 0.02
    (check,) = doc["otherData"]["clock_checks"]
    assert check == {"rank": 0, "file": "proton/proton.chrome_trace", "markers": 2,
                     "kind": "clock marks", "verdict": "placed",
                     "time_zero_unix_ns": [zero - 10_000, zero + 30_000], "error_bound_ms": 0.02}


@needs("aorta_proton")
def test_clock_marks_no_placement_fits_say_so_and_the_run_places_it(tmp_path):
    """The end mark's window 1 ms earlier than the start mark allows (a clock at another
    rate): one line, the verdict ``inconsistent``, and the trace centred in its run as without
    marks."""
    trial, _, _ = _marked_trial(tmp_path, [(20.0, 30.0), (1010.0, -990.0)])
    warned: list[str] = []
    done = build_timeline(trial, warn=warned.append)
    doc = json.loads(done.path.read_text())
    assert doc["otherData"]["sources"][0]["alignment"] == "run_window"
    assert doc["otherData"]["clock_checks"][0]["verdict"] == "inconsistent"
    assert warned == ["rank 0: proton/proton.chrome_trace: no single placement puts its 2 clock "
                      "marks inside their wall-clock windows (its clock ran at another rate?); "
                      "placed by its span instead"]


PROTON_H100 = REPO / "plugins/aorta_proton/tests/fixtures/h100"


def _streams_trial(tmp_path: Path) -> Path:
    trial = tmp_path / "trial_000"
    (trial / "proton").mkdir(parents=True)
    for suffix in ("chrome_trace", "marks.jsonl"):
        shutil.copy(PROTON_H100 / f"env_trace_streams.{suffix}", trial / f"proton/proton.{suffix}")
    shutil.copy(PROTON_H100 / "env_trace_streams.record.json", trial / "record.json")
    return trial


@needs("aorta_proton")
def test_proton_lane_of_three_streams_on_the_wall_clock_by_its_marks(tmp_path):
    """Issue 43, on the H100 capture (fixtures/h100): Proton 3.6 wrote one JSON document per
    GPU stream, one per line (the timeline had warned "not valid JSON (trailing characters at
    byte 131568)" and dropped the lane); every stream's kernels are merged, and the trace sits
    where its three clock marks fit their windows, as computed here from the files."""
    trial = _streams_trial(tmp_path)
    streams = [json.loads(line)["traceEvents"]
               for line in (trial / "proton/proton.chrome_trace").read_text().splitlines()]
    warned: list[str] = []
    done = build_timeline(trial, warn=warned.append)
    assert warned == [] and done.events == {"proton": sum(map(len, streams))}
    doc = json.loads(done.path.read_text())
    assert set(_names(doc, "thread_name").values()) == {"stream 7", "stream 20", "stream 32"}
    marks = [json.loads(line) for line in (trial / "proton/proton.marks.jsonl").open()]
    kernels = sorted((e for events in streams for e in events if e["name"] == "aorta_clock_mark"),
                     key=lambda e: e["ts"])
    pairs = list(zip(marks, kernels, strict=True))
    low = max(m["not_before_unix_ns"] - round(k["ts"] * 1000) for m, k in pairs)
    high = min(m["not_after_unix_ns"] - round((k["ts"] + k["dur"]) * 1000) for m, k in pairs)
    (check,) = doc["otherData"]["clock_checks"]
    assert check["verdict"] == "placed" and check["markers"] == 3 == len(kernels)
    assert check["time_zero_unix_ns"] == [low, high] and 0 < high - low < 100_000  # < 100 µs
    source = doc["otherData"]["sources"][0]
    assert source["alignment"] == "clock_marks"
    assert source["first_event_unix_ns"] == (low + high) // 2  # the first kernel is at ts 0
    origin = doc["otherData"]["origin_unix_ns"]
    placed = [e for e in doc["traceEvents"] if e.get("name") == "aorta_clock_mark"]
    for mark, event in zip(marks, sorted(placed, key=lambda e: e["ts"]), strict=True):
        start_ns = origin + event["ts"] * 1000
        assert mark["not_before_unix_ns"] - 1000 <= start_ns  # within a µs of float rounding
        assert start_ns + event["dur"] * 1000 <= mark["not_after_unix_ns"] + 1000


@needs("aorta_proton")
def test_proton_metrics_read_every_stream_and_leave_the_marks_out(tmp_path):
    from aorta_proton.parse import kernel_rows, parse

    trial = _streams_trial(tmp_path)
    events = [e for line in (trial / "proton/proton.chrome_trace").read_text().splitlines()
              for e in json.loads(line)["traceEvents"]]
    workload = [e for e in events if e["name"] != "aorta_clock_mark"]
    metrics = parse(trial / "proton")
    assert metrics["proton_kernel_count"] == len(workload) == len(events) - 3
    assert abs(metrics["proton_gpu_time_ms"] - sum(e["dur"] for e in workload) / 1e3) < 1e-9
    assert "aorta_clock_mark" not in {row.name for row in kernel_rows(trial / "proton")}
