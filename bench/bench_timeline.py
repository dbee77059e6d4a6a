"""Speed and memory of ``aorta timeline`` on an 8-rank, ~1.3 GB capture.

Generates a trial folder from the real H200 benchmark trace (the torchprof fixture
``cuda_h200_bench``: cpu_op nests, runtime/driver calls, kernels on four streams, memcpy/memset,
ac2g and fwdbwd flows, ProfilerStep#2-#4): per rank, the fixture's events repeated ``--tiles``
times one after another (steps renumbered, flow ids shifted, a pid of its own, 13 µs of skew
per rank), plus a benchmark JSONL with one line per step. Then, each in a fresh subprocess (so
each peak RSS is its own): the merge (``build_timeline``, its ranks in worker processes, whose
peaks are sampled every 10 ms), a typed msgspec decode of the ranks one after another (the
floor: reading the input), and the memory of holding one rank's, and every rank's, decoded
events at once. Targets (issue 43): the merge's parent, whole, under the largest rank file;
each worker adds <= 1.5x what holding one rank adds; time <= 4x the floor.

    python bench/bench_timeline.py [--ranks 8] [--tiles 22] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from bench_parallel_parse import pool_peaks
from bench_torchprof_parse import status_bytes

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / ("plugins/aorta_torchprof/tests/fixtures/cuda_h200_bench/torchprof/rank0/"
                  "rank0_step4.pt.trace.json.gz")
JSONL = ROOT / "bench/gpu_evidence/h200-2026-12-02/benchmark/telemetry_run.jsonl"
STEPS_PER_TILE = 3  # ProfilerStep#2-#4 in the fixture


def make_capture(trial: Path, ranks: int, tiles: int) -> dict:
    """Write ``trial/torchprof/rank<R>/rank<R>_step<N>.pt.trace.json`` and
    ``trial/benchmark/rank_<RR>_metrics.jsonl`` for every rank; return sizes and counts."""
    doc = orjson.loads(gzip.decompress(FIXTURE.read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    first = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - first + 1000.0
    template = orjson.loads(JSONL.read_text().splitlines()[2])
    total_bytes = total_events = largest = 0
    for rank in range(ranks):
        folder = trial / "torchprof" / f"rank{rank}"
        folder.mkdir(parents=True)
        path = folder / f"rank{rank}_step{1 + STEPS_PER_TILE * tiles}.pt.trace.json"
        doc["distributedInfo"]["rank"], doc["distributedInfo"]["world_size"] = rank, ranks
        head = orjson.dumps(doc)[:-1] + b',"traceEvents":['
        lines = []
        with path.open("wb") as fh:
            fh.write(head)
            for tile in range(tiles):
                shift = tile * span + rank * 13.0
                copy = [_moved(e, tile, rank, shift, len(events)) for e in events
                        if tile == 0 or e.get("ph") != "M"]
                fh.write((b"," if tile else b"") + orjson.dumps(copy)[1:-1])
                total_events += sum(e.get("ph") != "M" for e in copy)
                lines += _iterations(template, doc["baseTimeNanoseconds"], copy, rank, ranks)
            fh.write(b"]}")
        total_bytes += path.stat().st_size
        largest = max(largest, path.stat().st_size)
        jsonl = trial / "benchmark" / f"rank_{rank:02d}_metrics.jsonl"
        jsonl.parent.mkdir(exist_ok=True)
        jsonl.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return {"ranks": ranks, "tiles": tiles, "input_bytes": total_bytes,
            "largest_file_bytes": largest,
            "input_events": total_events}


def _moved(event: dict, tile: int, rank: int, shift: float, ids: int) -> dict:
    out = dict(event)
    if "ts" in out and out.get("ph") != "M":
        out["ts"] = out["ts"] + shift
    if isinstance(out.get("pid"), int) and out["pid"] > 100:  # the CPU process, not a GPU
        out["pid"] += rank
    if isinstance(out.get("id"), int):
        out["id"] += tile * ids
    name = out.get("name", "")
    if name.startswith("ProfilerStep#"):
        out["name"] = f"ProfilerStep#{int(name[13:]) + STEPS_PER_TILE * tile}"
    return out


def _iterations(template: dict, base: int, events: list[dict], rank: int, ranks: int
                ) -> list[dict]:
    """One JSONL line per CPU ProfilerStep#N of a tile, just inside it."""
    out = []
    for ev in events:
        if ev.get("cat") == "user_annotation" and ev["name"].startswith("ProfilerStep#"):
            start = base + round(ev["ts"] * 1000) + 20_000
            end = base + round((ev["ts"] + ev["dur"]) * 1000) - 200_000
            step = int(ev["name"][13:])
            out.append({**template, "rank": rank, "world_size": ranks, "step": step,
                        "global_step": step, "time_start_unix_ns": start,
                        "time_end_unix_ns": end, "step_time_ms": (end - start) / 1e6})
    return out


def _floor_type() -> type:
    import msgspec

    ev = msgspec.defstruct("Ev", [("name", str, ""), ("cat", str, ""), ("ph", str, ""),
                                  ("ts", float, 0.0), ("dur", float, 0.0)])
    return msgspec.defstruct("Doc", [("traceEvents", list[ev])])


def _measure(kind: str, trial: Path) -> dict:
    """One measurement in this (fresh) process: seconds (imports excluded) and peak RSS."""
    import msgspec

    from aorta_core.reports.timeline import build_timeline
    from aorta_core.reports.trace_events import read_trace

    traces = sorted(trial.glob("torchprof/rank*/*.json"))
    rss_before = status_bytes("VmRSS")
    t0 = time.perf_counter()
    extra: dict = {}
    if kind == "ours":
        with pool_peaks() as peaks:
            done = build_timeline(trial, trial / "timeline.json", warn=print)
        extra = {"events": sum(done.events.values()), "output_bytes": done.path.stat().st_size,
                 "worker_peaks": sorted(peaks.workers.values(), reverse=True),
                 "forkserver_peak": peaks.forkserver}
    elif kind == "floor":
        decoder = msgspec.json.Decoder(_floor_type())
        extra = {"events": sum(len(decoder.decode(p.read_bytes()).traceEvents) for p in traces)}
    elif kind == "one_rank_held":
        extra = {"events": len(read_trace(traces[0]).traceEvents)}
    elif kind == "all_ranks_held":
        held = [read_trace(p) for p in traces]
        extra = {"events": sum(len(d.traceEvents) for d in held)}
    seconds, peak = time.perf_counter() - t0, status_bytes("VmHWM")
    return {"kind": kind, "seconds": seconds, "peak_rss_bytes": peak,
            "peak_added_bytes": peak - rss_before, **extra}


def _run(kind: str, trial: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--measure", kind, str(trial)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--tiles", type=int, default=22, help="fixture copies per rank")
    parser.add_argument("--keep", type=Path, help="write the capture here and keep it")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(_measure(args.measure[0], Path(args.measure[1]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        trial = (args.keep or Path(tmp)) / "trial_000"
        t0 = time.perf_counter()
        capture = make_capture(trial, args.ranks, args.tiles)
        capture["generate_s"] = round(time.perf_counter() - t0, 1)
        rows = {k: _run(k, trial) for k in ("floor", "one_rank_held", "all_ranks_held", "ours")}
    ours, floor = rows["ours"], rows["floor"]
    print(f"capture: {capture['input_bytes'] / 1e9:.2f} GB, {capture['input_events']} events, "
          f"{args.ranks} ranks")
    print(f"{'what':<15} {'seconds':>8} {'peak RSS MB':>12} {'added MB':>9}")
    for kind, row in rows.items():
        print(f"{kind:<15} {row['seconds']:>8.2f} {row['peak_rss_bytes'] / 1e6:>12.0f} "
              f"{row['peak_added_bytes'] / 1e6:>9.0f}")
    worker = max(ours["worker_peaks"], default=0)
    print(f"{'ours (worker)':<15} {'':>8} {worker / 1e6:>12.0f} "
          f"{(worker - ours['forkserver_peak']) / 1e6:>9.0f}  ({len(ours['worker_peaks'])} "
          "workers; added: above the forkserver they fork from)")
    largest = capture["largest_file_bytes"]
    # ratios of what each adds to the interpreter and its imports
    worker_vs_one = ((worker - ours["forkserver_peak"])
                     / rows["one_rank_held"]["peak_added_bytes"])
    parent_vs_file = ours["peak_rss_bytes"] / largest
    print(json.dumps({
        "bench": "timeline",
        **capture,
        "output_bytes": ours["output_bytes"],
        "output_events": ours["events"],
        **{f"{k}_s": round(v["seconds"], 2) for k, v in rows.items()},
        **{f"{k}_peak_rss_mb": round(v["peak_rss_bytes"] / 1e6) for k, v in rows.items()},
        **{f"{k}_peak_added_mb": round(v["peak_added_bytes"] / 1e6) for k, v in rows.items()},
        "ours_workers": len(ours["worker_peaks"]),
        "ours_worker_peak_rss_mb": round(worker / 1e6),
        "ours_vs_floor": round(ours["seconds"] / floor["seconds"], 2),
        "ours_parent_peak_vs_largest_file": round(parent_vs_file, 3),
        "ours_worker_added_vs_one_rank_held": round(worker_vs_one, 2),
        "targets_met": parent_vs_file <= 1 and worker_vs_one <= 1.5
        and ours["seconds"] <= 4 * floor["seconds"],
    }))


if __name__ == "__main__":
    main()
