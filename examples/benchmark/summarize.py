"""Print a per-rank summary of a benchmark run folder (validates every line on the way)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from aorta_core.benchmark.schema import decode_line


def main(run_dir: str) -> int:
    files = sorted(Path(run_dir).glob("rank_*_metrics.jsonl"))
    if not files:
        print(f"no rank_*_metrics.jsonl in {run_dir}; pass the benchmark's output_dir")
        return 1
    for path in files:
        records = [decode_line(line) for line in path.read_bytes().splitlines()]
        measured = records[1:] or records
        step = statistics.median(r.step_time_ms for r in measured)
        line = f"rank {records[0].rank}: {len(records)} steps, median step {step:.2f} ms, " \
               f"final loss {records[-1].loss:.5f}"
        ratios = [r.overlap_ratio for r in measured if isinstance(r.overlap_ratio, float)]
        if ratios:
            line += f", overlap_ratio {statistics.fmean(ratios):.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
