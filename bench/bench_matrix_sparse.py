"""Benchmark: the matrix of records with many distinct metric names, against reading them.

Each record is bench_core's (~2.4 KB, two collectors) with its metrics replaced by ``--names``
numeric metrics whose names are distinct per record (``m<record>_<k>``): the layout where a table
of one column per metric is mostly empty (records x names slots for as many values as records
times names per record). Sizes: 100 and 1,000 records of 2,000 names (~6.7 and ~69 MB).

Each size is measured in a fresh process (its peak RSS is its own): the walk+read floor of
bench_core (``Path.glob`` + ``read_bytes`` of every record), then ``aorta_core.engine.matrix.build``
once for its peak memory (``VmHWM``, reset through ``/proc/self/clear_refs``, less the RSS
before it, libraries loaded and the floor run), then again for time (best of ``--repeat`` with
the first). Targets: build time <= 3x the floor, peak memory added <= 4x the records' bytes. CPU
seconds of the build are reported too (on a shared machine wall time includes waiting for a
core).

Two more references show what no build can go below: ``decode_s``, reading and decoding every
record as the build does (``load_record``: the values cannot be known for less), and
``write_s``, writing ``matrix.json``'s bytes once more as the build writes them
(``write_atomic``, to the same disk): ``ratio_vs_decode_write`` is the build over their sum.

Prints a table and one JSON line (``{"bench": "matrix_sparse", ...}``).

    python bench/bench_matrix_sparse.py [--records 100,1000] [--names 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from bench_core import _fake_record, walk_and_read
from bench_torchprof_parse import status_bytes

from aorta_core.api.files import write_atomic
from aorta_core.engine.records import TrialRecord, load_record, write_record

CELLS = 10


def write_records(out: Path, records: int, names: int) -> int:
    """``records`` records in :data:`CELLS` cells, ``names`` distinct metric names each; their
    bytes."""
    per_cell = max(records // CELLS, 1)
    for i in range(records):
        cell, trial = divmod(i, per_cell)
        record = _fake_record(cell, trial)
        record["metrics"] = {f"m{i}_{k}": 0.5 * k + i / 7 for k in range(names)}
        folder = out / "cells" / f"size={cell}" / f"trial_{trial:03d}"
        folder.mkdir(parents=True)
        write_record(folder / "record.json", msgspec.convert(record, TrialRecord))
    return sum(p.stat().st_size for p in out.glob("cells/*/trial_*/record.json"))


def measure(out: Path, repeat: int) -> dict:
    """In this (fresh) process: floor, then build for peak memory, then build for time."""
    from aorta_core.engine.matrix import build

    floor, decode = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        walk_and_read(out)
        floor.append(time.perf_counter() - start)
    for _ in range(repeat):
        start = time.perf_counter()
        for path in out.glob("cells/*/trial_*/record.json"):
            load_record(path)
        decode.append(time.perf_counter() - start)
    with open("/proc/self/clear_refs", "w") as fh:  # the peak from here on
        fh.write("5")
    rss_before = status_bytes("VmRSS")
    seconds, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        build(out)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if len(seconds) == 1:
            peak_added = status_bytes("VmHWM") - rss_before
    data, write = (out / "matrix.json").read_bytes(), []
    for _ in range(repeat):
        start = time.perf_counter()
        write_atomic(out / "written-again.json", data)
        write.append(time.perf_counter() - start)
    (out / "written-again.json").unlink()
    return {"floor_s": min(floor), "decode_s": min(decode), "write_s": min(write),
            "build_s": min(seconds), "build_cpu_s": min(cpu), "peak_added_bytes": peak_added}


def case(records: int, names: int, workdir: Path, repeat: int) -> dict:
    out = workdir / f"sparse-{records}x{names}"
    size = write_records(out, records, names)
    done = subprocess.run([sys.executable, __file__, "--measure", str(out), "--repeat",
                           str(repeat)], capture_output=True, text=True, check=True)
    m = json.loads(done.stdout.strip().splitlines()[-1])
    matrix_bytes = (out / "matrix.json").stat().st_size
    return {"records": records, "names_per_record": names, "records_bytes": size,
            "matrix_json_bytes": matrix_bytes, "walk_read_s": round(m["floor_s"], 4),
            "build_s": round(m["build_s"], 3), "build_cpu_s": round(m["build_cpu_s"], 3),
            "ratio": round(m["build_s"] / m["floor_s"], 2),
            "decode_s": round(m["decode_s"], 3), "write_s": round(m["write_s"], 3),
            "ratio_vs_decode_write": round(m["build_s"] / (m["decode_s"] + m["write_s"]), 2),
            "peak_added_mb": round(m["peak_added_bytes"] / 1e6),
            "peak_vs_records": round(m["peak_added_bytes"] / size, 2),
            "build_us_per_value": round(1e6 * m["build_s"] / (records * names), 3),
            "target_ratio": 3, "target_peak_vs_records": 4,
            "ok": m["build_s"] <= 3 * m["floor_s"] and m["peak_added_bytes"] <= 4 * size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100,1000", help="sizes, comma-separated")
    parser.add_argument("--names", type=int, default=2000, help="distinct names per record")
    parser.add_argument("--repeat", type=int, default=2, help="timings: best of N")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        results = {f"matrix_{n}x{args.names}": case(n, args.names, Path(tmp), args.repeat)
                   for n in map(int, args.records.split(","))}
    per_value = [r["build_us_per_value"] for r in results.values()]
    results["growth"] = {"build_us_per_value": per_value,
                         "largest_over_smallest": round(per_value[-1] / per_value[0], 3)}
    for name, values in results.items():
        print(f"{name:18s} " + "  ".join(f"{k}={v}" for k, v in values.items()))
    print(json.dumps({"bench": "matrix_sparse", **results}))


if __name__ == "__main__":
    main()
