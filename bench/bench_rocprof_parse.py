"""Benchmark: the rocprof collector's parser on a 1,000,000-row rocprofv3 kernel trace.

Generates a kernel trace CSV in a temp dir (rocprofv3 7.x columns, long C++ kernel names with
commas and quotes, ~450 MB), then measures, each in a fresh subprocess so peak RSS is its own:

- ``ours``: ``aorta_rocprof.parse.parse_metrics`` on a folder holding only that file (no stats
  CSV, so the dispatch-span fallback runs);
- ``polars_read_csv``: ``polars.read_csv`` of the file alone (no sums);
- ``dictreader``: ``csv.DictReader`` computing the same per-kernel sums.

Each time is the best of ``--repeat`` runs (default 3) in that subprocess and excludes imports
and library start-up (for the polars-based two, one query on a tiny CSV warms polars' thread
pool before the clock starts); peak RSS covers the whole subprocess.

Prints a table and one JSON line (``{"bench": "rocprof_parse", ...}``). Targets: ours no slower
than polars.read_csv, >= 10x faster than DictReader, ours' peak RSS <= the file size.

    python bench/bench_rocprof_parse.py [--rows N] [--repeat N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
    '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size",'
    '"VGPR_Count","Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y",'
    '"Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
)
#: Real-world shapes: ATen templates, Tensile GEMMs, RCCL, a literal with (RFC-doubled) quotes.
KERNELS = [
    "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast"
    "<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&"
    ", at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}) const&)"
    "::{lambda(int, bool)#1}>(int, at::native::gpu_kernel_impl_nocast)",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x224x64_MI16x16x1_SN_LDSB1_AFC0_AFEM1_AFEM1"
    "_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSU0_GSUAMB_GLS0_"
    "ISA950_IU1_K1_LDSTI0_LBSPPA1024_LBSPPB128_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_WG32_8_1",
    "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)",
    "void vllm::gather_and_maybe_dequant_cache_page<__hip_bfloat16, unsigned char, "
    "(vllm::Fp8KVCacheDataType)1, 576>(unsigned char const*, __hip_bfloat16*, int const*, "
    "int const*, int, int, int, long, long, long, long, float const*, int const*)",
    'void ops::apply<ops::tag<""fused, add"">, float>(float*, float const*, float const*, int, '
    "int, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>)",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 64, 64>(at::native::(anonymous namespace)::"
    "OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::"
    "(anonymous namespace)::OpaqueType<2u>, unsigned int, 64, 64>, at::native::(anonymous "
    "namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
    "void aiter::opus_moe_sorting_entry<aiter::MoeSortingMultiPhaseKernel_P23<aiter::"
    "MoeSortingProblemMp<int, float, int, 1, false, false, true> >, aiter::"
    "MoeSortingMultiPhaseKernel_P23<aiter::MoeSortingProblemMp<int, float, int, 1, false, false, "
    "true> >::Kargs>(aiter::MoeSortingMultiPhaseKernel_P23<aiter::MoeSortingProblemMp<int, float, "
    "int, 1, false, false, true> >::Kargs)",
]


def generate(path: Path, rows: int) -> None:
    """Write ``rows`` dispatches; duration of row i is 1000 + (i % 997) ns."""
    names = [f'"{k}"' for k in KERNELS]
    start = 1550151853029637
    with open(path, "w", buffering=1 << 22) as fh:
        fh.write(HEADER)
        chunk = []
        for i in range(rows):
            dur = 1000 + i % 997
            chunk.append(
                f'"KERNEL_DISPATCH","Agent 4",{1 + i % 4},{i % 4},834304,{i + 1},{10 + i % 5},'
                f"{names[i % len(names)]},{i + 1},{start},{start + dur},0,0,8,0,16,256,1,1,"
                f"{1024 * (1 + i % 8)},1024,1\n"
            )
            start += dur + 37
            if len(chunk) == 20000:
                fh.write("".join(chunk))
                chunk.clear()
        fh.write("".join(chunk))


#: Each measurement is (imports, timed code): imports are loaded before the clock starts.
#: Library start-up (the first polars query spins up its thread pool) is warmed on a tiny CSV.
WARM = "pl.read_csv(b'a,b\\n1,2\\n')"
OURS = (f"""
import warnings, sys
import polars as pl
from aorta_rocprof.parse import parse_metrics
warnings.simplefilter("ignore")
{WARM}
""", """
m = parse_metrics(sys.argv[1])
result = {"gpu_time_ms": m["rocprof_gpu_time_ms"], "kernel_count": m["rocprof_kernel_count"]}
""")
POLARS = (f"import sys, polars as pl\n{WARM}", """
df = pl.read_csv(sys.argv[2])
result = {"rows": df.height}
""")
DICTREADER = ("import csv, sys", """
totals, calls = {}, {}
with open(sys.argv[2], newline="") as fh:
    for row in csv.DictReader(fh):
        if row["Kind"] != "KERNEL_DISPATCH":
            continue
        d = int(row["End_Timestamp"]) - int(row["Start_Timestamp"])
        n = row["Kernel_Name"]
        totals[n] = totals.get(n, 0) + d
        calls[n] = calls.get(n, 0) + 1
result = {"gpu_time_ms": sum(totals.values()) / 1e6, "kernel_count": sum(calls.values())}
""")
HARNESS = """
import json, resource, sys, time
exec(sys.argv[3])
code = compile(sys.argv[4], "<bench>", "exec")
seconds = []
for _ in range(int(sys.argv[5])):
    t0 = time.perf_counter()
    exec(code)
    seconds.append(time.perf_counter() - t0)
seconds = min(seconds)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak, "result": result}))
"""


def measure(code: tuple[str, str], folder: Path, csv_path: Path, repeat: int) -> dict:
    """Run ``code`` in a fresh interpreter: best wall time of ``repeat`` runs, peak RSS."""
    out = subprocess.run(
        [sys.executable, "-c", HARNESS, str(folder), str(csv_path), *code, str(repeat)],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per measurement")
    parser.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        csv_path = folder / "aorta_kernel_trace.csv"
        t0 = time.perf_counter()
        generate(csv_path, args.rows)
        gen_s = time.perf_counter() - t0
        size = os.path.getsize(csv_path)
        runs = {name: measure(code, folder, csv_path, args.repeat) for name, code in
                (("ours", OURS), ("polars_read_csv", POLARS), ("dictreader", DICTREADER))}
    ours, pol, dic = runs["ours"], runs["polars_read_csv"], runs["dictreader"]
    if ours["result"] != dic["result"]:
        print(f"MISMATCH ours={ours['result']} dictreader={dic['result']}", file=sys.stderr)
        return 1
    summary = {
        "bench": "rocprof_parse", "rows": args.rows, "repeat": args.repeat, "file_bytes": size,
        "generate_s": round(gen_s, 3),
        **{f"{k}_s": round(v["seconds"], 3) for k, v in runs.items()},
        **{f"{k}_peak_rss_bytes": v["peak_rss_bytes"] for k, v in runs.items()},
        "ours_vs_polars": round(pol["seconds"] / ours["seconds"], 2),
        "ours_vs_dictreader": round(dic["seconds"] / ours["seconds"], 2),
        "ours_peak_rss_over_file": round(ours["peak_rss_bytes"] / size, 3),
    }
    summary["targets_met"] = (
        summary["ours_vs_polars"] >= 1.0 and summary["ours_vs_dictreader"] >= 10
        and summary["ours_peak_rss_over_file"] <= 1.0
    )
    print(f"{'measurement':<18}{'seconds':>10}{'peak RSS MB':>14}")
    for name, run in runs.items():
        print(f"{name:<18}{run['seconds']:>10.3f}{run['peak_rss_bytes'] / 2**20:>14.1f}")
    print(f"file: {size / 2**20:.1f} MB, {args.rows} rows")
    print(json.dumps(summary))
    return 0 if summary["targets_met"] else 2


if __name__ == "__main__":
    sys.exit(main())
