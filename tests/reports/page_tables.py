"""report.html read back as a browser parses it: its tables (under which section and heading,
header texts, each cell's text and the first ``title`` inside it) and paragraphs."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path


@dataclass
class Cell:
    text: str = ""
    title: str | None = None


@dataclass
class Table:
    section: str | None
    heading: str
    classes: list[str]
    header: list[Cell] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)

    def column(self, name: str) -> list[Cell]:
        i = [h.text for h in self.header].index(name)
        return [row[i] for row in self.rows]


class PageTables(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.paragraphs: list[tuple[str | None, str]] = []
        self.sections: list[str | None] = []
        self._heading = ""
        self._in_heading = False
        self._cell: Cell | None = None
        self._paragraph: str | None = None
        self._row: list[Cell] | None = None

    @property
    def _section(self) -> str | None:
        return next((s for s in reversed(self.sections) if s), None)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.sections.append(attrs.get("id"))
        elif tag in ("h2", "h3"):
            self._heading, self._in_heading = "", True
        elif tag == "table":
            self.tables.append(Table(self._section, self._heading,
                                     (attrs.get("class") or "").split()))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = Cell()
        elif tag == "p":
            self._paragraph = ""
        if self._cell is not None and attrs.get("title") and self._cell.title is None:
            self._cell.title = attrs["title"]

    def handle_endtag(self, tag):
        if tag == "section" and self.sections:
            self.sections.pop()
        elif tag in ("h2", "h3"):
            self._in_heading = False
            self._heading = self._heading.strip()
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._cell.text = self._cell.text.strip()
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            table = self.tables[-1]
            if table.header:
                table.rows.append(self._row)
            else:
                table.header = self._row
            self._row = None
        elif tag == "p" and self._paragraph is not None:
            self.paragraphs.append((self._section, " ".join(self._paragraph.split())))
            self._paragraph = None

    def handle_data(self, data):
        if self._in_heading:
            self._heading += data
        if self._cell is not None:
            self._cell.text += data
        if self._paragraph is not None:
            self._paragraph += data


def read_page(path: Path) -> PageTables:
    parsed = PageTables()
    parsed.feed(path.read_text())
    return parsed
