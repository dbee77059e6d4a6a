"""Checks, after a real ``pip install``, that the outside collectors (this folder's rusage and
docs/plugins.md's pyinstrument, examples/plugin) are listed and run in a sweep together.

    python tests/third_party_collector/check_install.py <scratch dir>
"""

import json
import subprocess
import sys
from pathlib import Path


def aorta(*args: str) -> subprocess.CompletedProcess:
    """``python -m aorta_core`` run from the scratch folder: from the checkout, its aorta_core/
    would shadow the installed aorta-core (and say so)."""
    return subprocess.run([sys.executable, "-m", "aorta_core", *args], capture_output=True,
                          text=True, check=False, cwd=sys.argv[1])


def main() -> None:
    scratch = Path(sys.argv[1])
    listed = aorta("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    for name, distribution in (("rusage", "aorta-rusage-example"),
                               ("pyinstrument", "aorta-pyinstrument")):
        assert rows[name]["status"] == "ok", rows
        assert rows[name]["distribution"] == distribution, rows
    script = scratch / "work.py"
    script.write_text("sum(range(10**6))\n")
    out = scratch / "sweep"
    done = aorta("sweep=repeat", "trials=2", "collector=[rusage,pyinstrument]", f"output={out}",
                 "--", sys.executable, str(script))
    assert done.returncode == 0, done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    (cell,) = matrix["cells"]
    assert cell["trials"]["pass"] == 2, cell
    summary = cell["metrics_summary"]
    assert summary["rusage_user_cpu_s"]["n"] == 2 and summary["rusage_max_rss_bytes"]["min"] > 0
    assert summary["pyinstrument_process_count"]["min"] == 1
    duration = summary["pyinstrument_duration_ms"]
    assert duration["n"] == 2 and duration["min"] > 0
    print(f"third-party collectors ok: rusage_max_rss_bytes median "
          f"{summary['rusage_max_rss_bytes']['median']:.0f}, pyinstrument_duration_ms median "
          f"{duration['median']:.1f}")


if __name__ == "__main__":
    main()
