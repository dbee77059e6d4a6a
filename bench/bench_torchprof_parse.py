"""Speed of the torchprof parser on a ~200 MB Kineto-shaped chrome trace (~550k events).

Generates the trace (pretty-printed like Kineto: cpu_op nests, cudaLaunchKernel runtime calls,
ac2g flows, compute kernels on one stream overlapping NCCL kernels on another, memcpy/memset,
ProfilerStep annotations), then times in fresh subprocesses (so each peak RSS is its own):
our parse + overlap, the msgspec floor (typed Struct of name/cat/ph/ts/dur), ``orjson.loads``,
and HolisticTraceAnalysis load + ``get_comm_comp_overlap`` (``--skip-hta`` to leave it out).
Each is run ``--repeat`` times, interleaved, and the median run reported (the machine is
shared and noisy). Targets: ours ~1.15x floor, >= 30x faster than HTA, peak RSS <= 2.5x the
file size.

    python bench/bench_torchprof_parse.py [--events 550000] [--repeat 3] [--skip-hta] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_KERNELS = [
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
]
_OPS = ["aten::mm", "aten::add", "aten::_softmax", "aten::linear"]
_INTEGER_US = False
_SHAPES = (
    '"Input Dims": [[64, 1024], [1024, 1024]], "Input type": ["c10::BFloat16", "c10::BFloat16"], '
    '"Input Strides": [[1024, 1], [1024, 1]], "Concrete Inputs": ["", ""]'
)
_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: str) -> str:
    if _INTEGER_US:
        ts, dur = float(int(ts)), float(int(dur))
    return (
        f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
        f'    "ts": {ts:.3f}, "dur": {dur:.3f},\n    "args": {{\n      {args}\n    }}\n  }}'
    )


def _flow(ph: str, corr: int, pid: int, tid: int, ts: float) -> str:
    tail = ', "bp": "e"' if ph == "f" else ""
    return (
        f'  {{\n    "ph": "{ph}", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {ts:.3f},\n'
        f'    "cat": "ac2g", "name": "ac2g"{tail}\n  }}'
    )


def _kernel_args(corr: int, ext: int, stream: int) -> str:
    return (
        f'"External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": {stream}, '
        f'"correlation": {corr}, "registers per thread": 128, "shared memory": 49152, '
        f'"blocks per SM": 1.5, "warps per SM": 6.0, "grid": [132, 1, 1], "block": [128, 1, 1], '
        f'"est. achieved occupancy %": 9'
    )


def make_trace(
    path: Path, n_events: int, seed: int = 0, steps: int = 8, integer_us: bool = False,
    rank: int = 0, world_size: int = 1,
) -> None:
    """Write a Kineto-shaped trace of about ``n_events`` events (of ``rank``) to ``path``.

    ``integer_us`` truncates ts/dur to whole µs, as 2023-era traces had them (and as HTA
    itself truncates while loading), so HTA and the parser see identical intervals.
    """
    global _INTEGER_US
    _INTEGER_US = integer_us
    rng = random.Random(seed)
    units = max(n_events // 6, 1)
    per_step = max(units // steps, 1)
    out: list[str] = []
    cpu_t, gpu_t, nccl_t = 1_000_000.0, 1_000_050.0, 1_000_050.0
    corr = ext = 0
    for step in range(steps):
        step_start = cpu_t
        body: list[str] = []
        for u in range(per_step):
            corr += 1
            ext += 1
            op = rng.randrange(len(_OPS))
            dur_op = rng.uniform(8, 20)
            body.append(
                _x(
                    "cpu_op",
                    _OPS[op],
                    100,
                    100,
                    cpu_t,
                    dur_op,
                    (
                        f'"External id": {ext}, "Record function id": 0, "Sequence number": {ext}, '
                        f'"Fwd thread id": 0, "Ev Idx": {ext}, {_SHAPES}'
                    ),
                )
            )
            body.append(
                _x(
                    "cpu_op",
                    "aten::empty",
                    100,
                    100,
                    cpu_t + 1,
                    1.5,
                    f'"External id": {ext + 1}, "Ev Idx": {ext + 1}, {_SHAPES}',
                )
            )
            launch = cpu_t + 4
            body.append(
                _x(
                    "cuda_runtime",
                    "cudaLaunchKernel",
                    100,
                    100,
                    launch,
                    3.5,
                    f'"External id": {ext}, "cbid": 211, "correlation": {corr}',
                )
            )
            body.append(_flow("s", corr, 100, 100, launch))
            gpu_t = max(gpu_t, launch + 5) + rng.uniform(0, 2)
            kdur = rng.uniform(5, 40)
            if u % 40 == 39:
                cat, name, stream = "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7
            elif u % 97 == 96:
                cat, name, stream = "gpu_memset", "Memset (Device)", 7
            elif u % 25 == 0:
                cat, name, stream = "kernel", _NCCL, 20
            else:
                cat, name, stream = "kernel", _KERNELS[op], 7
            start = gpu_t
            if stream == 20:
                start = nccl_t = max(nccl_t, launch + 5)
                kdur *= 6
                nccl_t += kdur
            else:
                gpu_t += kdur
            body.append(_x(cat, name, 0, stream, start, kdur, _kernel_args(corr, ext, stream)))
            body.append(_flow("f", corr, 0, stream, start))
            ext += 1
            cpu_t += dur_op + 2
        out.append(
            _x(
                "user_annotation",
                f"ProfilerStep#{step + 2}",
                100,
                100,
                step_start,
                cpu_t - step_start,
                f'"External id": {ext + 1}',
            )
        )
        out.extend(body)
        ext += 2
    head = (
        '{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "nccl", '
        f'"rank": {rank}, "world_size": {world_size}}},\n  "displayTimeUnit": "ms",\n'
        '  "baseTimeNanoseconds": 1,\n'
        '  "traceEvents": [\n'
    )
    path.write_text(head + ",\n".join(out) + '\n  ],\n  "traceName": "synthetic"\n}\n')


def _floor_types() -> type:
    """The floor's document type: a typed Struct of just name/cat/ph/ts/dur per event."""
    import msgspec

    ev = msgspec.defstruct(
        "Ev",
        [
            ("name", str, ""),
            ("cat", str, ""),
            ("ph", str, ""),
            ("ts", float, 0.0),
            ("dur", float, 0.0),
        ],
    )
    return msgspec.defstruct("Doc", [("traceEvents", list[ev])])


def _measure(kind: str, path: Path) -> dict:
    """Run one measurement in this (fresh) process: seconds (imports excluded) and peak RSS."""
    t0 = time.perf_counter()
    _import(kind)
    t0, import_s = time.perf_counter(), time.perf_counter() - t0
    rss_before = status_bytes("VmRSS")
    extra: dict = {"import_s": import_s}
    if kind == "ours":
        from aorta_torchprof.parse import parse_dir

        metrics = parse_dir(path.parent)
        extra = {k: metrics.get(k) for k in ("torchprof_kernel_count", "torchprof_overlap_ratio")}
    elif kind == "floor":
        import msgspec

        floor = _floor_types()
        extra = {"events": len(msgspec.json.decode(path.read_bytes(), type=floor).traceEvents)}
    elif kind == "orjson":
        import orjson

        extra = {"events": len(orjson.loads(path.read_bytes())["traceEvents"])}
    elif kind == "hta":
        from hta.trace_analysis import TraceAnalysis

        analysis = TraceAnalysis(trace_dir=str(path.parent), include_last_profiler_step=True)
        frame = analysis.get_comm_comp_overlap(visualize=False)
        extra = {"comp_comm_overlap_pctg": float(frame["comp_comm_overlap_pctg"].iloc[0])}
    seconds = time.perf_counter() - t0
    peak = status_bytes("VmHWM")
    return {"kind": kind, "seconds": seconds, "peak_rss_bytes": peak,
            "peak_added_bytes": peak - rss_before, **extra}


def status_bytes(field: str) -> int:
    """``VmHWM`` (peak RSS; reset by exec, unlike ``ru_maxrss``, which a child inherits from
    the parent that generated the trace) or ``VmRSS`` of this process, in bytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _import(kind: str) -> None:
    """Load each contender's libraries before the clock starts (a one-off cost per process)."""
    modules = {
        "ours": ["aorta_torchprof.parse"],
        "floor": ["msgspec"],
        "orjson": ["orjson"],
        "hta": ["hta.trace_analysis"],
    }[kind]
    for name in modules:
        __import__(name)


def _run(kind: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--measure", kind, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median_run(runs: list[dict]) -> dict:
    """The run of median time (its peak memory with it)."""
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=550_000)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of floor, ours and HTA, interleaved; medians reported")
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(_measure(args.measure[0], Path(args.measure[1]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "rank0.pt.trace.json"
        make_trace(path, args.events)
        size = path.stat().st_size
        kinds = ["floor", "orjson", "ours"] + ([] if args.skip_hta else ["hta"])
        runs: dict[str, list[dict]] = {k: [] for k in kinds}
        for i in range(args.repeat):  # interleaved; orjson once (it is only context)
            for kind in kinds:
                if kind != "orjson" or i == 0:
                    runs[kind].append(_run(kind, path))
        rows = {k: _median_run(v) for k, v in runs.items()}
    floor, ours = rows["floor"]["seconds"], rows["ours"]["seconds"]
    print(f"trace: {size / 1e6:.1f} MB, {rows['floor']['events']} events")
    print(f"{'what':<8} {'seconds':>8} {'peak RSS MB':>12} {'x floor':>8}")
    for kind, row in rows.items():
        print(
            f"{kind:<8} {row['seconds']:>8.2f} {row['peak_rss_bytes'] / 1e6:>12.0f} "
            f"{row['seconds'] / floor:>8.2f}"
        )
    summary = {
        "bench": "torchprof_parse",
        "file_bytes": size,
        "events": rows["floor"]["events"],
        "repeat": args.repeat,
        **{f"{k}_s": round(v["seconds"], 3) for k, v in rows.items()},
        "ours_vs_floor": round(ours / floor, 3),
        "ours_peak_vs_file": round(rows["ours"]["peak_rss_bytes"] / size, 3),
        "ours_peak_added_vs_file": round(rows["ours"]["peak_added_bytes"] / size, 3),
        "floor_peak_vs_file": round(rows["floor"]["peak_rss_bytes"] / size, 3),
        "hta_vs_ours": round(rows["hta"]["seconds"] / ours, 1) if "hta" in rows else None,
        "ours_overlap_ratio": rows["ours"].get("torchprof_overlap_ratio"),
        "hta_overlap_pctg": rows.get("hta", {}).get("comp_comm_overlap_pctg"),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
