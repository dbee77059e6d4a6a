"""Plotly figures as plain dicts (no validation cost) and their PNG export through kaleido."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aorta_core.api.files import write_atomic

Figure = dict[str, Any]

#: ``AORTA_REPORT_PNG=0`` turns PNG export off (e.g. in test suites that run many sweeps);
#: ``AORTA_REPORT_PNG=1`` asks for it: a missing kaleido is then said, not passed over.
PNG_ENV = "AORTA_REPORT_PNG"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
_EXTRA = "pip install 'aorta-core[report]'"
_CHROMIUM = ("apt-get install -y chromium (Debian/Ubuntu), set BROWSER_PATH to a Chrome/Chromium, "
             "or run kaleido_get_chrome")
_NO = ("0", "false", "no", "off")
#: The PNG lines said in this process: each is said once per run, not per page or rebuild.
_said: set[str] = set()


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


def _browser() -> tuple[str | None, str]:
    """The Chrome/Chromium to hand kaleido, or ``None`` and what is missing. Looked for where
    the user puts one: ``BROWSER_PATH`` (which must be an executable), ``PATH``, kaleido's own
    download (``kaleido_get_chrome``); not at fixed paths off ``PATH``."""
    override = os.environ.get("BROWSER_PATH")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override, ""
        return None, f"BROWSER_PATH={override} is not an executable file"
    try:
        from choreographer.browsers import Chromium

        found = Chromium.find_browser(skip_local=False, skip_typical=True)
        if found:
            return str(found), ""
    except Exception:  # choreographer absent or its lookup changed: PATH alone
        pass
    found = next((p for p in map(shutil.which, _BROWSERS) if p), None)
    return found, "" if found else "no Chrome/Chromium found (on PATH or kaleido's download)"


def find_browser() -> str | None:
    """The Chrome/Chromium kaleido is given (``BROWSER_PATH``, PATH, kaleido's own download)."""
    return _browser()[0]


def pngs_wanted(pngs: bool | None) -> bool:
    if pngs is not None:
        return pngs
    return os.environ.get(PNG_ENV, "1").strip().lower() not in _NO


def pngs_asked(pngs: bool | None) -> bool:
    """Whether PNGs were asked for (``pngs=True``, or ``AORTA_REPORT_PNG`` set to anything but
    off), not only left on by default."""
    if pngs is not None:
        return pngs
    value = os.environ.get(PNG_ENV, "").strip().lower()
    return bool(value) and value not in _NO


def _once(line: str, key: str | None = None) -> str | None:
    """``line`` the first time its ``key`` (default: itself) comes up in this run, else None."""
    key = key or line
    if key in _said:
        return None
    _said.add(key)
    return line


def _kaleido_installed() -> bool:
    try:
        return importlib.util.find_spec("kaleido") is not None
    except (ImportError, ValueError):
        return False


def export_pngs(figures: dict[str, Figure], folder: Path, asked: bool = False) -> str | None:
    """Write ``<folder>/<name>.png`` per figure; return the one line to show the user, if any.

    What is missing is said exactly and once per run: kaleido (the ``report`` extra) only when
    PNGs were ``asked`` for, Chrome/Chromium whenever kaleido is there to use it."""
    if not figures:
        return None
    browser, missing = _browser()
    if not _kaleido_installed():
        if not asked:  # no extra, no request: the user wants no PNGs
            return None
        if browser is None:
            return _once(f"PNGs skipped: kaleido is not installed and {missing}; to get them, "
                         f"{_EXTRA} and {_CHROMIUM}")
        return _once(f"PNGs skipped: kaleido is not installed; to get them, {_EXTRA}")
    if browser is None:
        return _once(f"PNGs skipped: {missing}; to get them, {_CHROMIUM}")
    for noisy in ("kaleido", "choreographer", "logistro"):
        # Their INFO lines would reach the console through the handler Hydra installed.
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        import kaleido

        with tempfile.TemporaryDirectory(prefix="aorta-png-") as private:
            jobs = [{"fig": fig, "path": Path(private) / f"{name}.png",
                     "opts": {"format": "png", "width": 1000, "height": 500}}
                    for name, fig in figures.items()]
            kaleido.write_fig_from_object_sync(jobs, kopts={"mathjax": False, "path": browser},
                                               cancel_on_error=True)
            _place(folder, [job["path"] for job in jobs])
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        return _once(f"PNGs skipped: kaleido failed with {browser} ({reason}); pass --no-png "
                     f"or set {PNG_ENV}=0 to skip them", key="kaleido failed")
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
