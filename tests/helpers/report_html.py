"""Reading report.md and report.html back as tables of visible cell text, to check that they say the
same.

The Markdown side undoes ``fmt.table``'s escaping and keeps a link's or image's label, a code span's
text; the HTML side is Python's own ``html.parser`` collecting the text of every ``<th>``/``<td>``.
Independent of the converter in ``ascendbench.report.html`` on purpose.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# a link or image; labels may hold name[0]
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\((?:<[^>]+>|[^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)


def visible(markdown_cell: str) -> str:
    """What a reader sees of one Markdown cell: labels of links, text of code spans and bold."""
    shown = _BOLD.sub(r"\1", _CODE.sub(r"\1", _LINK.sub(r"\1", markdown_cell.replace("\\|", "|"))))
    return " ".join(shown.split())


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of ``text``: rows of visible cells, header first, the ``|---|`` line left
    out."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|(---\|)+", line):
            if not previous.startswith("|"):
                tables.append([])
            cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
            tables[-1].append([visible(c) for c in cells])
        previous = line
    return tables


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def html_tables(text: str) -> list[list[list[str]]]:
    """Every ``<table>`` of an HTML page: rows of cell text (whitespace collapsed), header row
    first."""
    parser = _Tables()
    parser.feed(text)
    return parser.tables


def numbers(tables: list[list[list[str]]]) -> list[str]:
    """Every number written in the tables' cells, in reading order."""
    return [n for table in tables for row in table for cell in row for n in NUMBER.findall(cell)]
