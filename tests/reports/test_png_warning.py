"""The PNG line says exactly what is missing, once per run, and only when PNGs were asked for
(``AORTA_REPORT_PNG=1``) or the ``report`` extra (kaleido) is installed.

Each case is a real sweep in a child process whose world is cut down: ``PATH`` holds a folder
with or without a ``chromium`` in it (``BROWSER_PATH`` unset), and the interpreter's
``sys.path`` holds either the real site-packages or a copy of it (links to every entry) without
kaleido. Nothing of aorta is replaced.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from aorta_core.reports.figures import find_browser

#: A payload that reports a metric differing by trial, so the report has two figures (wall time
#: and the metric; a metric the same in every trial is folded into a line, not plotted).
PAYLOAD = ("import json, os; json.dump({'step_ms': 3 + int(os.environ['AORTA_TRIAL'])}, "
           "open(os.environ['AORTA_METRICS_PATH'], 'w'))")
KALEIDO_ONLY = ("aorta: warning: PNGs skipped: kaleido is not installed; to get them, "
                "pip install 'aorta-core[report]'")
CHROMIUM = ("apt-get install -y chromium (Debian/Ubuntu), set BROWSER_PATH to a Chrome/Chromium, "
            "or run kaleido_get_chrome")
NO_CHROMIUM = ("aorta: warning: PNGs skipped: no Chrome/Chromium found (on PATH or kaleido's "
               f"download); to get them, {CHROMIUM}")
BOTH = ("aorta: warning: PNGs skipped: kaleido is not installed and no Chrome/Chromium found (on "
        "PATH or kaleido's download); to get them, pip install 'aorta-core[report]' and "
        f"{CHROMIUM}")


def _need_kaleido() -> None:
    pytest.importorskip("kaleido", reason="needs kaleido: pip install -e '.[report]'")


@pytest.fixture(scope="module")
def without_kaleido(tmp_path_factory) -> Path:
    """site-packages as links to each entry, kaleido's left out (its .pth files still run)."""
    farm = tmp_path_factory.mktemp("site-without-kaleido")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.split("-")[0].split(".")[0].lower() != "kaleido":
            (farm / entry.name).symlink_to(entry)
    return farm


def _bin(tmp_path: Path, chromium: str | None) -> Path:
    """A PATH folder holding ``chromium`` (a link to the real one) or nothing."""
    folder = tmp_path / ("bin-chromium" if chromium else "bin-empty")
    folder.mkdir(exist_ok=True)
    if chromium and not (folder / "chromium").exists():
        (folder / "chromium").symlink_to(chromium)
    return folder


def _python(site: Path | None, code: str) -> list[str]:
    """``python -c code`` with the real site-packages, or ``-S`` and ``site`` as its only one."""
    if site is None:
        return [sys.executable, "-c", code]
    return [sys.executable, "-S", "-c",
            f"import site; site.addsitedir({str(site)!r}); del site\n{code}"]


def _run(tmp_path: Path, bin_dir: Path, site: Path | None, code: str, png: str | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("BROWSER_PATH", "AORTA_REPORT_PNG")}
    env |= {"PATH": str(bin_dir), "COLUMNS": "300"}
    if png is not None:
        env["AORTA_REPORT_PNG"] = png
    return subprocess.run(_python(site, code), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def _sweep(tmp_path: Path, bin_dir: Path, site: Path | None, png: str | None = None,
           name: str = "out"):
    """A real sweep (``python -m aorta_core``) of two trials; its output and console text."""
    out = tmp_path / name
    argv = [f"output={out}", "sweep=repeat", "trials=2", "--", sys.executable, "-c", PAYLOAD]
    code = (f"import runpy, sys; sys.argv = ['aorta', *{argv!r}]; "
            "runpy.run_module('aorta_core', run_name='__main__')")
    done = _run(tmp_path, bin_dir, site, code, png)
    assert (out / "report.html").is_file(), done.stdout + done.stderr
    return out, done.stdout + done.stderr


def _png_lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if "PNG" in line]


@pytest.fixture
def chromium_missing(tmp_path) -> Path:
    """An empty PATH folder, after checking nothing else (kaleido's own download) gives one."""
    bin_dir = _bin(tmp_path, None)
    done = _run(tmp_path, bin_dir, None, "from aorta_core.reports.figures import find_browser; "
                "print(find_browser())")
    if done.stdout.strip() != "None":
        pytest.skip(f"a Chrome/Chromium is found off PATH ({done.stdout.strip()})")
    return bin_dir


def test_no_kaleido_and_not_asked_says_nothing(tmp_path, without_kaleido, browser):
    out, text = _sweep(tmp_path, _bin(tmp_path, browser), without_kaleido)
    assert _png_lines(text) == [] and not (out / "report_png").exists()


def test_no_kaleido_asked_names_kaleido_only(tmp_path, without_kaleido, browser):
    """Chromium is there: the line names kaleido and nothing about a browser (it said "install
    Chromium" here)."""
    _, text = _sweep(tmp_path, _bin(tmp_path, browser), without_kaleido, png="1")
    assert _png_lines(text) == [KALEIDO_ONLY]


def test_no_kaleido_and_no_chromium_asked_names_both(tmp_path, without_kaleido, chromium_missing):
    _, text = _sweep(tmp_path, chromium_missing, without_kaleido, png="1")
    assert _png_lines(text) == [BOTH]


def test_kaleido_without_chromium_names_chromium_once(tmp_path, chromium_missing):
    """The extra is installed, so the line comes unasked; the report has two figures and is
    built three times in this run (the sweep's end, then twice more): one line."""
    _need_kaleido()
    out, text = _sweep(tmp_path, chromium_missing, None)
    assert _png_lines(text) == [NO_CHROMIUM]
    assert not list((out / "report_png").glob("*.png"))
    again = _run(tmp_path, chromium_missing, None, (
        "from pathlib import Path\n"
        "from aorta_core.reports.sweep import write_sweep_report\n"
        f"for _ in range(3): write_sweep_report(Path({str(out)!r}))\n"))
    assert _png_lines(again.stdout + again.stderr) == [NO_CHROMIUM], again.stderr
    page = (out / "report.html").read_text()
    assert page.count("Plotly.newPlot(") >= 2


def test_turned_off_says_nothing(tmp_path, without_kaleido, chromium_missing):
    for png in ("0", "off"):
        out, text = _sweep(tmp_path, chromium_missing, without_kaleido, png=png, name=png)
        assert _png_lines(text) == [] and not (out / "report_png").exists(), png


def test_everything_there_writes_pngs_without_a_word(tmp_path, browser):
    _need_kaleido()
    out, text = _sweep(tmp_path, _bin(tmp_path, browser), None)
    assert _png_lines(text) == []
    assert len(list((out / "report_png").glob("*.png"))) >= 2
    assert find_browser() is not None
