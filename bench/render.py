"""Write BENCHMARKS.md from the JSON results of the last ``nox -s bench`` (and the GPU runs).

    python bench/render.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    ("CPU", ROOT / "bench" / "results_cpu.json"),
    ("GPU", ROOT / "bench" / "results_gpu.json"),
)

TARGETS = {
    "core": "trial overhead over a bare `subprocess.run` <= 30 ms (in-process `run_trial`, and "
            "per trial of the real CLI `sweep=repeat` from its records' clocks); matrix of "
            "100,000 records <= 2x walking the folders and reading the files' bytes, growing "
            "linearly from 1,000 (`matrix_growth`: build time per record at each size); "
            "`--help` no slower than `aorta plugins`, both <= 1 s",
    "matrix_sparse": "matrix of 1,000 records x 2,000 metric names distinct per record (and 100 x "
                     "2,000): build <= 3x bench_core's walk+read floor, peak memory added <= 4x "
                     "the records' bytes (fresh process; `build_cpu_s`: CPU seconds of the build, "
                     "`matrix_json_bytes`: the summary it must write); `before`: the tree before "
                     "the long layout, same VM",
    "rocprof_parse": "1,000,000-row kernel trace: no slower than `polars.read_csv` of the file, "
                     ">= 10x faster than `csv.DictReader`, peak RSS <= file size",
    "torchprof_parse": "one ~160 MB trace to metrics and overlap: ~1.15x a typed msgspec "
                       "decode of name/cat/ph/ts/dur, >= 30x faster than HTA load + overlap, "
                       "peak memory <= 2.5x file size (`ours_peak_vs_file`: the whole process, "
                       "libraries preloaded; `ours_peak_added_vs_file`: what the parse adds)",
    "parallel_parse": "eight ~160 MB rank traces parsed by worker processes vs one after "
                      "another: <= 0.6x on 2 cores (<= 0.2x on 16: GPU section); each worker "
                      "<= 2.5x its file, the parent <= 0.25x the sum of the files; a 1 GB trace "
                      "parses within a 4 GB address space (`big_trace`). "
                      "`cpu_control_ratio`: eight CPU-bound interpreters at once vs one after "
                      "another in the same run, the parallelism the machine actually gave",
    "timeline": "8-rank 1.3 GB capture merged by `aorta timeline` (issue 43): the command's "
                "process, whole, under the largest rank file (`ours_parent_peak_vs_largest_file` "
                "<= 1); each rank's worker adds <= 1.5x what holding one rank's decoded trace "
                "adds; time <= 4x a typed msgspec decode of name/cat/ph/ts/dur of every rank, "
                "one after another (`before`: the tree that merged in the command's process)",
    "startup": "`aorta parse torchprof` of a near-empty trace <= 2x `python -c \"import "
               "aorta_core\"` (fresh interpreters, interleaved, medians; `before`: the tree "
               "before issue 27's lazy imports, same run of the same VM)",
    "ranks": "64 generated rank traces (bench_timeline's capture; `tiles` x ~7.3 MB each) "
             "through the real `aorta parse torchprof`, `report overlap`, `timeline --ranks`, "
             "`diagnose`: parse wall <= 1.3x (sum of per-file parse times / cores), each "
             "worker's peak <= 2.5x the largest file, the parent's added peak <= 0.25x one "
             "file; 8 ranks (`eight`) <= 0.6x sequential on 2 cores (0.2x on 16), and "
             "`aorta diagnose` of them <= 1.5x their parallel parse (`diagnose_sequential_s`: "
             "the diagnosis with `AORTA_WORKERS=1`, its per-file cost against `sequential_s`). "
             "The issue's 100-200 MB per "
             "rank "
             "(`--tiles 20`) is for a big machine. `cpu_control_ratio`: as many CPU-bound "
             "interpreters as cores at once vs one after another (0.5 on an idle 2-core VM)",
    "piece_size": "`aorta_core.api.decode_pieces`'s `PIECE_BYTES` within 5 % of the best piece "
                  "size (128 KiB-16 MiB) for both torchprof's parse and `aorta diagnose`'s read "
                  "of one ~160 MB trace, this CPU's L2 cache recorded",
    "compare_rows": "the statistics of `aorta compare` (U test, bootstrap CI, BH q) for 1,500 "
                    "rows x 10 trials at once, part of the 1 s below",
    "compare_kernels": "two runs of 5 cells x 10 trials x 300 kernels compared at kernel level "
                       "<= 1 s (`compare_s`, scipy imported; `cli_s`: `aorta compare --json` "
                       "from a fresh interpreter), against reading and decoding every kernel "
                       "table (`read_tables_s`, the floor); `flagged_shifted` of `shifted` "
                       "kernels made 10 % slower found, `flagged` in all",
    "kernel_compare_proof": "a real profiler (torchprof on the CPU): one op 30 % slower (the "
                            "sort of examples/reports/kernels/ops.py) flagged alone, its rows "
                            "explaining the step difference; 20 A/A pairs at 8 trials: "
                            "family-wise false alarms <= 5 % (<= 1 of 20). GPU (an H100 or "
                            "H200): a GEMM ~3 % longer (examples/reports/kernels/gemms.py) "
                            "flagged alone in >= 80 % of pairs at 10 trials, the significant "
                            "rows explaining the step difference within 5 %",
    "scaling": "2 joblib workers run trials of a trivial command >= 1.6x as fast as 1 worker",
    "benchmark_gpu": "compute stream >= 50 % of the measured bf16 matmul rate; telemetry on vs off "
                     "<= 2 % step time",
}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value)}`"
    return str(value)


def _table(values: dict) -> list[str]:
    lines = ["| measurement | value |", "| --- | --- |"]
    for key, value in values.items():
        if isinstance(value, dict) and all(not isinstance(v, dict) for v in value.values()):
            for sub, v in value.items():
                lines.append(f"| {key}.{sub} | {_fmt(v)} |")
        else:
            lines.append(f"| {key} | {_fmt(value)} |")
    return lines


def main() -> None:
    out = [
        "# Benchmarks",
        "",
        "Each target is a ratio against a reference measured in the same run (never a timed",
        "test).",
        "CPU numbers come from `nox -s bench` (`bench/bench_*.py`, results in",
        "`bench/results_cpu.json`); GPU numbers from the scripts named below, run on the lent",
        "NVIDIA H200 (`bench/results_gpu.json`).",
        "Regenerate this page with `python bench/render.py`.",
    ]
    for label, path in SOURCES:
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        out += ["", f"## {label}: {data['machine']}, {data['date']}"]
        for result in data["results"]:
            name = result.pop("bench")
            out += ["", f"### {name}", "", f"Target: {TARGETS.get(name, 'see the script')}.", ""]
            if "script" in result:
                out += [f"Script: `{result.pop('script')}`.", ""]
            out += _table(result)
    (ROOT / "BENCHMARKS.md").write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
