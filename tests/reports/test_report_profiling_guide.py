"""Every shell command of docs/profiling.md runs, in order, in an empty folder.

A command whose line ends in ``# needs-gpu`` or ``# needs-amd`` is skipped (this machine has
neither); everything else must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from reports.report_helpers import REPO

GUIDE = REPO / "docs" / "profiling.md"
SKIP = re.compile(r"#\s*needs-(gpu|amd)\s*$")


def commands(text: str) -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip())
    return out


def test_every_command_of_the_guide_runs(tmp_path):
    cmds = commands(GUIDE.read_text())
    skipped = [c for c in cmds if SKIP.search(c)]
    assert len(skipped) >= 4 and len(cmds) - len(skipped) >= 10
    env = {**os.environ, "AORTA_REPORT_PNG": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for cmd in cmds:
        if SKIP.search(cmd):
            continue
        done = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert (tmp_path / "runs/overlap/summary.json").is_file()
    assert (tmp_path / "runs/profiled/report.html").is_file()
    assert (tmp_path / "runs/compare.html").is_file()
    assert list((tmp_path / "runs/bench2/torch_profiler/rank0").glob("*.pt.trace.json"))
