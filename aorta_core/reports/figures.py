"""Plotly figures as plain dicts (no validation cost) and their PNG export through kaleido."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aorta_core.api.files import write_atomic

Figure = dict[str, Any]

#: ``AORTA_REPORT_PNG=0`` turns PNG export off (e.g. in test suites that run many sweeps).
PNG_ENV = "AORTA_REPORT_PNG"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
_HOW = ("install Chromium (Debian/Ubuntu: apt-get install -y chromium) or set BROWSER_PATH, "
        "and pip install 'aorta-core[report]'")


_AXIS = {"gridcolor": "#e5e5e5", "linecolor": "#999", "zerolinecolor": "#ccc", "automargin": True}


def figure(data: list[dict[str, Any]], title: str, x: str, y: str, **layout: Any) -> Figure:
    """A figure dict with the report's common layout."""
    return {
        "data": data,
        "layout": {
            "title": {"text": title},
            "plot_bgcolor": "white",
            "xaxis": {"title": {"text": x}, **_AXIS},
            "yaxis": {"title": {"text": y}, "rangemode": "tozero", **_AXIS},
            "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
            "legend": {"orientation": "h", "y": -0.2},
            **layout,
        },
    }


def find_browser() -> str | None:
    """The Chrome/Chromium kaleido would use (``BROWSER_PATH``, PATH, kaleido's own download)."""
    try:
        from choreographer.browsers import Chromium

        found = Chromium.find_browser(skip_local=False)
        if found:
            return str(found)
    except Exception:  # choreographer absent or its lookup changed: fall back to PATH
        pass
    return os.environ.get("BROWSER_PATH") or next(
        (p for p in map(shutil.which, _BROWSERS) if p), None)


def pngs_wanted(pngs: bool | None) -> bool:
    if pngs is not None:
        return pngs
    return os.environ.get(PNG_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def export_pngs(figures: dict[str, Figure], folder: Path) -> str:
    """Write ``<folder>/<name>.png`` per figure; return the one line to show the user."""
    if not figures:
        return "no figures to write as PNG"
    try:
        import kaleido
    except ImportError:
        return f"PNGs skipped: kaleido is not installed; to get them, {_HOW}"
    if find_browser() is None:
        return f"PNGs skipped: no Chrome/Chromium found; to get them, {_HOW}"
    for noisy in ("kaleido", "choreographer", "logistro"):
        # Their INFO lines would reach the console through the handler Hydra installed.
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-png-") as private:
            jobs = [{"fig": fig, "path": Path(private) / f"{name}.png",
                     "opts": {"format": "png", "width": 1000, "height": 500}}
                    for name, fig in figures.items()]
            kaleido.write_fig_from_object_sync(jobs, kopts={"mathjax": False},
                                               cancel_on_error=True)
            _place(folder, [job["path"] for job in jobs])
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        return f"PNGs skipped: kaleido failed ({reason}); to get them, {_HOW}"
    return f"wrote {len(figures)} PNG(s) to {folder}"


def _place(folder: Path, pngs: list[Path]) -> None:
    """Move what kaleido rendered (into a private folder: it writes through whatever is at the
    path it is given) into ``folder``, never through a link: a link at the folder's name is
    replaced by a folder, one at a PNG's name by the PNG
    (:func:`~aorta_core.api.files.write_atomic`).
    """
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    for png in pngs:
        write_atomic(folder / png.name, png.read_bytes())
