"""Checks, after a real ``pip install``, that the outside collector is listed and runs in a sweep.

    python tests/third_party_collector/check_install.py <scratch dir>
"""

import json
import subprocess
import sys
from pathlib import Path


def aorta(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aorta_core", *args], capture_output=True,
                          text=True, check=False)


def main() -> None:
    scratch = Path(sys.argv[1])
    listed = aorta("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["rusage"]["status"] == "ok", rows
    assert rows["rusage"]["distribution"] == "aorta-rusage-example", rows
    out = scratch / "sweep"
    done = aorta("sweep=repeat", "trials=2", "collector=rusage", f"output={out}", "--",
                 sys.executable, "-c", "sum(range(10**6))")
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    (cell,) = matrix["cells"]
    assert cell["trials"]["pass"] == 2, cell
    summary = cell["metrics_summary"]
    assert summary["rusage_user_cpu_s"]["n"] == 2 and summary["rusage_max_rss_bytes"]["min"] > 0
    print(f"third-party collector ok: rusage_max_rss_bytes median "
          f"{summary['rusage_max_rss_bytes']['median']:.0f}")


if __name__ == "__main__":
    main()
