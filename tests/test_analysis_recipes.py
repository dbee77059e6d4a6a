"""The "Analysis recipes" of docs/collectors/*.md run and print what the pages show.

A page's ``bash`` and ``python`` blocks run in order, in one empty folder whose ``plugins`` links
to the repository's (the pages' paths are relative to the repository root). A ``text`` block
right after one is its expected stdout (``<repo>`` standing for the checkout's path): exactly,
or, marked ``text numbers-vary`` (a fresh sweep's timings), the same table head and row count.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from needs import needs

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(\w+)([^\n]*)\n(.*?)```", re.S)


def steps(page: Path) -> list[tuple[str, str, str | None, bool]]:
    """(language, code, expected stdout or None, numbers vary) of each runnable block."""
    section = page.read_text().split("\n## Analysis recipes\n", 1)[1].split("\n## ", 1)[0]
    blocks = BLOCK.findall(section)
    out = []
    for (lang, _, code), after in zip(blocks, [*blocks[1:], None], strict=True):
        if lang in ("bash", "python"):
            text = after if after and after[0] == "text" else None
            out.append((lang, code, text and text[2], bool(text and "numbers-vary" in text[1])))
    return out


def head_and_rows(table: str) -> tuple[str, int]:
    """A polars table's head with numbers and padding masked, and its number of rows."""
    head, _, body = table.partition("╞")
    head = re.sub(r"[\s\u2500-\u257f]+", " ", re.sub(r"\d+(\.\d+)?", "#", head))
    return head.strip(), sum(line.startswith("│") for line in body.splitlines())


@pytest.mark.parametrize("collector", [
    "torchprof", pytest.param("proton", marks=needs("triton")), "rocprof"])
def test_recipes_print_what_the_page_shows(collector, tmp_path):
    page = REPO / "docs" / "collectors" / f"{collector}.md"
    (tmp_path / "plugins").symlink_to(REPO / "plugins")
    env = {**os.environ, "AORTA_REPORT_PNG": "0",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    found = steps(page)
    assert sum(lang == "python" for lang, *_ in found) >= 2, f"{page}: too few recipes"
    for lang, code, expected, vary in found:
        argv = ["bash", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{code}\n{done.stderr[-3000:]}"
        if expected is None:
            continue
        got = done.stdout.replace(str(REPO), "<repo>").rstrip()
        if vary:
            assert head_and_rows(got) == head_and_rows(expected), f"{code}\n{got}"
        else:
            assert got == expected.rstrip(), f"{code}\n{got}"
