"""report.html: the text of report.md as one self-contained web page with sortable tables and embedded pictures.

The page is rendered from the very Markdown written to report.md (the same sections, tables and cells), so
the two cannot disagree: there is no second path from the records to HTML. The converter knows the subset
of Markdown the report writes (``#`` headings, paragraphs, ``- `` lists, pipe tables, links, images, code
spans, bold). Plots and the jobs' pictures (side-by-side comparisons, heatmaps) are embedded as ``data:``
URIs; the only script is the inline table sorter below. Nothing is fetched when the page opens.
"""

from __future__ import annotations

import base64
import html
import itertools
import re
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import quote

from ascendbench.report.html_assets import SORT_TABLES, STYLE

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
        ".webp": "image/webp"}
URL_SAFE = "/=,+@;~!$'()*"  # kept as written in a link's path; the rest is %-encoded (spaces, #, ?)
_HEADING = re.compile(r"^(#{1,6}) (.*)$")
_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_INLINE = re.compile(r"\\(?P<escaped>[\\`*\[\]<])|`(?P<code>[^`]+)`"
                     r"|(?P<image>!)?\[(?P<label>(?:[^\[\]]|\[[^\[\]]*\])*)\]\((?:<(?P<angled>[^>]+)>|(?P<target>[^)\s]+))\)"
                     r"|\*\*(?P<bold>.+?)\*\*")


class Pictures:
    """Turns link targets (relative to ``base_dir``) into ``data:`` URIs: each picture up to ``max_bytes``,
    all of them together up to ``total_bytes`` (the first come first; later ones stay links, counted in
    ``linked``)."""

    def __init__(self, base_dir: Path, max_bytes: int, total_bytes: int | None = None,
                 roots: Sequence[Path] = ()) -> None:
        self.base_dir = Path(base_dir)
        self.roots = [Path(r).resolve() for r in (base_dir, *roots)]  # where an embedded picture may lie
        self.max_bytes = max_bytes
        self.left = total_bytes
        self.linked = 0  # pictures left as links because the page's budget was spent

    def data_uri(self, target: str) -> str | None:
        """The picture at ``target`` as a ``data:`` URI; None when not a picture, missing, too large, or past
        the page's budget."""
        if not relative_target(target):
            return None
        path = (self.base_dir / target).resolve()
        mime = MIME.get(path.suffix.lower())
        if not any(path == r or r in path.parents for r in self.roots):
            return None  # outside --out and the jobs' own directories (a ../ or a symbolic link): never read
        if mime is None or not path.is_file() or path.stat().st_size > self.max_bytes:
            return None
        size = path.stat().st_size
        if self.left is not None and size > self.left:
            self.linked += 1
            return None
        if self.left is not None:
            self.left -= size
        return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")

    def link(self, label: str, target: str, image: bool) -> str:
        """``[label](target)`` as HTML: an embedded picture when it is one (``image``: shown in place)."""
        if not (relative_target(target) or target.startswith(("https://", "http://"))):
            return html.escape(f"{label} ({target})")  # an absolute, //host or scheme: target is no link here
        anchor = f'<a href="{html.escape(quote(target, safe=URL_SAFE))}">{html.escape(label)}</a>'
        uri = self.data_uri(target)
        if uri is None:
            why = "" if not image else (" (not embedded: no such picture, larger than html.embed_max_mb, or past "
                                        "html.embed_total_mb)")
            return anchor + why
        picture = f'<img src="{uri}" alt="{html.escape(label)}" title="{html.escape(label)}">'
        return f'<figure class="{"plot" if image else "picture"}">{picture}<figcaption>{anchor}</figcaption></figure>'


def relative_target(target: str) -> bool:
    """True for a relative path: no scheme (``javascript:``, ``file:``), not ``/abs`` nor ``//host``.

    >>> [relative_target(t) for t in ("plots/a.png", "../job/x.png", "/etc/x.png", "//evil/x", "data:x")]
    [True, True, False, False, False]
    """
    return not (target.startswith(("/", "\\")) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target))


def inline(text: str, pictures: Pictures) -> str:
    """One line of Markdown text (links, images, code spans, bold) as escaped HTML."""
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos:match.start()]))
        pos = match.end()
        if match["escaped"] is not None:  # a backslash-escaped character (record text: fmt.md_escape)
            out.append(html.escape(match["escaped"]))
        elif match["code"] is not None:
            out.append(f"<code>{html.escape(match['code'])}</code>")
        elif match["bold"] is not None:
            out.append(f"<strong>{html.escape(match['bold'])}</strong>")
        else:
            out.append(pictures.link(match["label"], match["angled"] or match["target"], bool(match["image"])))
    return "".join(out) + html.escape(text[pos:])


def table_cells(line: str) -> list[str]:
    """The cells of one Markdown table line, ``\\|`` back to ``|`` (the inverse of ``fmt.table``)."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT.split(inner)]


def slug(text: str) -> str:
    """An element id for a heading: lower case, runs of other characters as ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _kind(line: str) -> str:
    if not line.strip():
        return "blank"
    if _HEADING.match(line):
        return "heading"
    if line.startswith("|"):
        return "table"
    return "list" if line.startswith("- ") else "paragraph"


def blocks(markdown: str) -> Iterator[tuple[str, list[str]]]:
    """(kind, lines) of each block: heading (one line each), table, list, paragraph; blank lines dropped."""
    for kind, group in itertools.groupby(markdown.splitlines(), key=_kind):
        lines = list(group)
        if kind == "heading":
            yield from ((kind, [line]) for line in lines)
        elif kind != "blank":
            yield kind, lines


def render_table(lines: list[str], pictures: Pictures) -> str:
    """A pipe table as a sortable ``<table>`` (a header line, the separator, then body lines)."""
    if len(lines) < 2 or not _SEPARATOR.match(lines[1].strip()):
        return render_paragraph(lines, pictures)
    head = "".join(f'<th scope="col">{inline(c, pictures)}</th>' for c in table_cells(lines[0]))
    body = "\n".join("<tr>" + "".join(f"<td>{inline(c, pictures)}</td>" for c in table_cells(line)) + "</tr>"
                     for line in lines[2:])
    return (f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody></table></div>")


def render_paragraph(lines: list[str], pictures: Pictures) -> str:
    """Lines of text as one paragraph."""
    return "<p>" + "<br>\n".join(inline(line, pictures) for line in lines) + "</p>"


def render_list(lines: list[str], pictures: Pictures) -> str:
    """``- item`` lines as a bulleted list."""
    return "<ul>\n" + "\n".join(f"<li>{inline(line[2:], pictures)}</li>" for line in lines) + "\n</ul>"


def render_heading(line: str, pictures: Pictures) -> str:
    """``## Title`` as ``<h2 id="title">``."""
    hashes, title = _HEADING.match(line).groups()
    return f'<h{len(hashes)} id="{slug(title)}">{inline(title, pictures)}</h{len(hashes)}>'


def render_body(markdown: str, pictures: Pictures) -> str:
    """The report's Markdown as HTML block elements, in order."""
    render = {"table": render_table, "list": render_list, "paragraph": render_paragraph,
              "heading": lambda lines, p: render_heading(lines[0], p)}
    return "\n\n".join(render[kind](lines, pictures) for kind, lines in blocks(markdown))


def contents(markdown: str) -> str:
    """A navigation list of the ``##`` sections."""
    titles = [m.group(2) for m in map(_HEADING.match, markdown.splitlines()) if m and m.group(1) == "##"]
    items = "".join(f'<li><a href="#{slug(t)}">{html.escape(t)}</a></li>' for t in titles)
    return f'<nav><ul>{items}</ul></nav>' if titles else ""


def html_document(markdown: str, base_dir: Path, embed_max_mb: float, embed_total_mb: float | None = None,
                  roots: Sequence[Path] = ()) -> str:
    """The whole report.html for the report's Markdown, with links relative to ``base_dir`` (its directory).

    Only pictures inside ``base_dir`` or ``roots`` (the records' job directories), links resolved, are read.
    Pictures up to ``embed_max_mb`` MiB each, ``embed_total_mb`` MiB together, are embedded; larger, missing
    or later ones stay links, and a note at the top says how many pictures the page budget left as links.
    """
    total = None if embed_total_mb is None else int(float(embed_total_mb) * 2**20)
    pictures = Pictures(base_dir, int(float(embed_max_mb) * 2**20), total, roots)
    body = render_body(markdown, pictures)
    note = "" if not pictures.linked else (
        f'<p class="note">{pictures.linked} picture(s) are links, not embedded: the page already holds '
        f"html.embed_total_mb={embed_total_mb:g} MiB of pictures (raise it with "
        f"<code>--set html.embed_total_mb=...</code>; open those links beside the report directory).</p>\n")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>ascendbench report</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n"
            f"{contents(markdown)}\n<main>\n{note}{body}\n</main>\n"
            f"<script>\n{SORT_TABLES}</script>\n</body>\n</html>\n")
