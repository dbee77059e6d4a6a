"""The self-contained page shell: inline CSS, plotly.js embedded once, tables, figures, links."""

from __future__ import annotations

import hashlib
import html
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aorta_core.api.files import write_atomic
from aorta_core.reports.figures import Figure, export_pngs

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5rem 2rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}td.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;max-width:100%}.note{color:#555;font-size:.9rem}
.bad{color:#b00}.good{color:#070}.figure{margin:1rem 0}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{background:#e8e8e8}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
#headline,#failures{background:#f7f9fc;border:1px solid #dde3ee;padding:.25rem 1rem 1rem;
margin:1rem 0}#failures{background:#fdf6f6;border-color:#eccaca}
#headline h2,#failures h2{margin-top:.75rem}.fold{font-size:.9rem;margin:.25rem 0}
"""

#: Sorts a ``table.sortable`` by the clicked column: numbers (``data-v``) by value, the rest as
#: text, cells without a value last; a second click reverses. No attribute handlers: the page
#: carries no ``on*`` attribute.
_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('thead th').forEach(function(th,i){
  th.title=(th.title?th.title+' \u2014 ':'')+'click to sort';
  th.addEventListener('click',function(){
   var asc=th.dataset.dir!=='asc',body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
   t.querySelectorAll('thead th').forEach(function(h){delete h.dataset.dir;});
   th.dataset.dir=asc?'asc':'desc';
   function key(r){var c=r.cells[i];if(!c)return null;
    if(c.dataset.v!==undefined)return parseFloat(c.dataset.v);
    var s=c.textContent.trim();return s&&s!=='not measured'?s:null;}
   rows.sort(function(x,y){var a=key(x),b=key(y);
    if(a===null||b===null)return (a===null)-(b===null);
    if(typeof a==='number'&&typeof b==='number')return asc?a-b:b-a;
    if(typeof a==='number')return -1;if(typeof b==='number')return 1;
    return asc?a.localeCompare(b):b.localeCompare(a);});
   rows.forEach(function(r){body.appendChild(r);});
  });
 });
});
"""


#: Names used as ids as they are: no ``--``, which only the hashed form has.
_PLAIN_ID = re.compile(r"(?!.*--)[A-Za-z][A-Za-z0-9_.-]{0,79}")


class Markup(str):
    """Text that is already HTML: tables and paragraphs insert it without escaping."""


class Keyed(str):
    """Text shown in a table cell that a sortable table sorts by ``key`` (a number; ``None``:
    no value, sorted last)."""

    key: float | None

    def __new__(cls, text: str, key: float | None) -> Keyed:
        obj = super().__new__(cls, text)
        obj.key = key
        return obj


def inside(path: str) -> bool:
    """Whether ``path`` (``/``-separated, from a record or matrix.json) names something inside
    the report's folder: relative, no ``..``, no backslash or control character. A link to
    anything else could lead a reader out of the output (``../../etc/passwd``, ``/``, a
    drive), so it is shown as text."""
    parts = path.removesuffix("/").split("/")
    return bool(path) and not any(
        p in ("", ".", "..") or "\\" in p or not p.isprintable() for p in parts)


def link(text: str, path: str) -> Markup:
    """``text`` linking to ``path`` (made of record data) when it stays inside the output, else
    ``text`` alone. Every character outside ``/`` is percent-encoded, so no scheme
    (``javascript:``) or query can be formed."""
    if not inside(path):
        return Markup(html.escape(text))
    return Markup(f'<a href="{html.escape(quote(path, safe="/"), quote=True)}">'
                  f"{html.escape(text)}</a>")


def element_id(name: str) -> str:
    """A safe element id (and PNG file name) for ``name``, which may come from data: the name
    itself when it is plain (letters, digits, ``_``, ``.``, ``-``), else a readable slug, ``--``
    and a short hash of the whole name (the ``--`` keeps the two kinds apart), never escaped
    text."""
    if _PLAIN_ID.fullmatch(name):
        return name
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", name)[:40]
    digest = hashlib.blake2s(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{slug}--{digest}"


def _plain(value: Any) -> Any:
    """A figure with every string escaped for plotly, which renders ``<b>``, ``<a href>`` and
    entities in titles, names, labels and hover text: data must show as the text it is."""
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def fmt(value: Any) -> str:
    """Numbers with 4 significant digits; ``None`` as an em dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _cell(value: Any) -> str:
    if isinstance(value, Markup):
        return f"<td>{value}</td>"
    if isinstance(value, Keyed):
        key = "" if value.key is None or not math.isfinite(value.key) else \
            f' data-v="{value.key!r}"'
        return f"<td class=num{key}>{html.escape(value)}</td>"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    key = f' data-v="{float(value)!r}"' if numeric and math.isfinite(value) else ""
    return f"<td{' class=num' if numeric else ''}{key}>{html.escape(fmt(value))}</td>"


def _head(column: str) -> str:
    return f"<th>{column if isinstance(column, Markup) else html.escape(column)}</th>"


class Page:
    """Collects sections, then writes one HTML file (and the figures' PNGs)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = []
        self.figures: dict[str, Figure] = {}
        self.sortable = False

    def heading(self, text: str, level: int = 2) -> None:
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def paragraph(self, text: str, css: str = "") -> None:
        body = text if isinstance(text, Markup) else html.escape(text)
        self.parts.append(f"<p class='{css}'>{body}</p>" if css else f"<p>{body}</p>")

    def bullets(self, items: Iterable[str]) -> None:
        self.parts.append("<ul>" + "".join(
            f"<li>{i if isinstance(i, Markup) else html.escape(i)}</li>" for i in items) + "</ul>")

    def begin(self, name: str) -> None:
        """Open a ``<section>`` whose id is :func:`element_id` of ``name``; :meth:`end` closes
        it."""
        self.parts.append(f"<section id={element_id(name)}>")

    def end(self) -> None:
        self.parts.append("</section>")

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
              sortable: bool = False, css: str = "") -> None:
        """A table; ``sortable``: clicking a header sorts by that column (inline script, added
        once per page); ``css``: more classes (plain words)."""
        classes = " ".join(c for c in (css, "sortable" if sortable else "") if c)
        self.sortable = self.sortable or sortable
        head = "".join(map(_head, columns))
        body = "".join(f"<tr>{''.join(_cell(v) for v in row)}</tr>" for row in rows)
        attr = f" class='{html.escape(classes, quote=True)}'" if classes else ""
        self.parts.append(
            f"<div class=scroll><table{attr}><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")

    def frame(self, df: Any) -> None:
        """A polars DataFrame as a table."""
        self.table(df.columns, df.rows())

    def figure(self, name: str, fig: Figure) -> None:
        """A plotly figure; its div id and PNG file name are :func:`element_id` of ``name``
        (which may come from data), its strings escaped (:func:`_plain`)."""
        key = element_id(name)
        self.figures[key] = _plain(fig)
        self.parts.append(f"\0figure:{key}\0")

    def render(self) -> str:
        import plotly.io as pio

        out, first = [], True
        for part in self.parts:
            if part.startswith("\0figure:"):
                name = part[len("\0figure:"):-1]
                div = pio.to_html(self.figures[name], full_html=False, include_plotlyjs=first,
                                  validate=False, div_id=name,
                                  config={"displaylogo": False, "responsive": True})
                out.append(f"<div class=figure>{div}</div>")
                first = False
            else:
                out.append(part)
        script = f"<script>{_SORT_JS}</script>" if self.sortable else ""
        return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
                f"<meta name=viewport content='width=device-width, initial-scale=1'>"
                f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head>"
                f"<body><h1>{html.escape(self.title)}</h1>{''.join(out)}{script}"
                f"</body></html>")

    def write(self, path: Path, png_dir: Path | None, asked: bool = False) -> str | None:
        """Write the page atomically; then the PNGs when ``png_dir`` is given (the line to show,
        if any; ``asked``: PNGs were asked for, :func:`~.figures.export_pngs`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.render().encode())
        return export_pngs(self.figures, png_dir, asked) if png_dir is not None else None
