"""Assert that a sweep's matrix.json holds the given metrics for every passing trial.

python check_matrix.py <sweep output> METRIC [METRIC ...]
"""

import json
import sys
from pathlib import Path


def main(output: str, *metrics: str) -> int:
    cells = json.loads((Path(output) / "matrix.json").read_text())["cells"]
    bad = 0
    for cell in cells:
        passed = cell["trials"]["pass"]
        for metric in metrics:
            stats = cell["metrics_summary"].get(metric)
            ok = passed > 0 and stats is not None and stats["n"] == passed
            bad += not ok
            shown = f"mean {stats['mean']:.6g} over {stats['n']}" if stats else "missing"
            print(f"{'ok  ' if ok else 'FAIL'} {cell['cell']}: {metric} {shown}")
        print(f"     top: {cell.get('metrics_text', {})}")
    return 1 if bad or not cells else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
