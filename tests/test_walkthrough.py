"""docs/sweeps.md "Fix, re-run, compare, gate", run as written: each ``$`` line of the section,
in order, in an empty folder, must end with the exit status its comment states (``# exit N``).
``python -m aorta_core`` and ``aorta`` run this Python's aorta; nothing else is changed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "sweeps.md"
_STEP = re.compile(r"^\$ (?P<command>.+?)\s+# exit (?P<status>\d+)$")


def _steps() -> list[tuple[str, int]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Fix, re-run, compare, gate", 1)[1].split("\n## ", 1)[0]
    return [(m["command"], int(m["status"])) for line in section.splitlines()
            if (m := _STEP.match(line))]


def _as_here(command: str) -> str:
    """The documented command with this test's Python in place of ``python`` and ``aorta``."""
    python = shlex.quote(sys.executable)
    command = re.sub(r"^python -m aorta_core\b", f"{python} -m aorta_core", command)
    return re.sub(r"^aorta\b", f"{python} -m aorta_core", command)


def test_the_fix_rerun_compare_gate_walkthrough_runs_as_written(tmp_path: Path):
    steps = _steps()
    assert len(steps) == 7, steps  # the section lost or gained a step: read it again
    env = {**os.environ, "AORTA_REPORT_PNG": "0"}
    outputs = []
    for command, status in steps:
        done = subprocess.run(_as_here(command), shell=True, cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=300, check=False)
        outputs.append(done.stderr + done.stdout)
        assert done.returncode == status, f"$ {command}\n{done.stderr}\n{done.stdout}"
        assert "Traceback" not in done.stderr, done.stderr
    assert "cannot start './bench.sh'" in outputs[0]
    assert "4 that errored run again: retry=errored" in outputs[2]
    assert "--fail-on: default → env.DELAY=1.5 wall_time_s:" in outputs[6]
