"""report.html: report.md as one self-contained page (sortable tables, inline pictures)."""

from __future__ import annotations

import base64
import html
import itertools
import re
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

import yaml

from ascendbench.report.fmt import word

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
        ".webp": "image/webp"}
URL_SAFE = "/=,+@;~!$'()*"  # kept as written in a link's path; the rest is %-encoded (spaces, #, ?)
_HEADING = re.compile(r"^(#{1,6}) (.*)$")
_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_INLINE = re.compile(r"\\(?P<escaped>[\\`*\[\]<])|`(?P<code>[^`]+)`"
                     r"|(?P<image>!)?\[(?P<label>(?:[^\[\]]|\[[^\[\]]*\])*)\]"
                     r"\((?:<(?P<angled>[^>]+)>|(?P<target>[^)\s]+))\)"
                     r"|\*\*(?P<bold>.+?)\*\*")
PAGE = yaml.safe_load(Path(__file__).with_name("page.yaml").read_text())  # style, script


class Pictures:
    """Link targets in ``base_dir`` or ``roots`` -> ``data:`` URIs within the byte budgets."""

    def __init__(self, base_dir: Path, max_bytes: int, total_bytes: int | None = None,
                 roots: Sequence[Path] = (), lang: str = "en") -> None:
        self.base_dir, self.lang = Path(base_dir), lang
        self.roots = [Path(r).resolve() for r in (base_dir, *roots)]
        self.max_bytes, self.left, self.linked = max_bytes, total_bytes, 0
        self.shown: dict[Path, str] = {}  # embedded once: a later mention links to it

    def data_uri(self, target: str) -> str | None:
        """The picture at ``target`` as a ``data:`` URI, or None (outside, too large, no budget)."""
        if not relative_target(target):
            return None
        path = (self.base_dir / target).resolve()
        mime = MIME.get(path.suffix.lower())
        if not any(path == r or r in path.parents for r in self.roots) or mime is None \
                or not path.is_file() or path.stat().st_size > self.max_bytes:
            return None
        size = path.stat().st_size
        if self.left is not None:
            if size > self.left:
                self.linked += 1
                return None
            self.left -= size
        return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")

    def link(self, label: str, target: str, image: bool) -> str:
        """``[label](target)`` as HTML: an embedded picture when it is one (``image``: in place)."""
        if not (relative_target(target) or target.startswith(("https://", "http://"))):
            return html.escape(f"{label} ({target})")  # an absolute, //host or scheme: no link
        anchor = f'<a href="{html.escape(quote(target, safe=URL_SAFE))}">{html.escape(label)}</a>'
        seen = self.shown.get((self.base_dir / target).resolve())
        if seen is not None:
            return f'{anchor} (<a href="#{seen}">{word("h_shown_above", self.lang)}</a>)'
        uri = self.data_uri(target)
        if uri is None:
            return anchor + (f" ({word('h_not_embedded', self.lang)})" if image else "")
        picture = f'<img src="{uri}" alt="{html.escape(label)}" title="{html.escape(label)}">'
        kind, figure_id = "plot" if image else "picture", f"figure-{len(self.shown) + 1}"
        self.shown[(self.base_dir / target).resolve()] = figure_id
        return (f'<figure class="{kind}" id="{figure_id}">{picture}<figcaption>{anchor}'
                "</figcaption></figure>")


def relative_target(target: str) -> bool:
    """True for a relative path: no scheme (``javascript:``, ``file:``), no ``/abs``, ``//host``."""
    return not (target.startswith(("/", "\\")) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target))


def inline(text: str, pictures: Pictures) -> str:
    """One line of Markdown text (links, images, code spans, bold) as escaped HTML."""
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos:match.start()]))
        pos = match.end()
        if match["escaped"] is not None:  # a backslash-escaped character (record text)
            out.append(html.escape(match["escaped"]))
        elif match["code"] is not None:
            out.append(f"<code>{html.escape(match['code'])}</code>")
        elif match["bold"] is not None:
            out.append(f"<strong>{html.escape(match['bold'])}</strong>")
        else:
            target = match["angled"] or match["target"]
            out.append(pictures.link(match["label"], target, bool(match["image"])))
    return "".join(out) + html.escape(text[pos:])


def table_cells(line: str) -> list[str]:
    """The cells of one Markdown table line, ``\\|`` back to ``|``."""
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
    return "table" if line.startswith("|") else "list" if line.startswith("- ") else "paragraph"


def _block(kind: str, lines: list[str], pictures: Pictures) -> str:
    if kind == "table" and len(lines) > 1 and _SEPARATOR.match(lines[1].strip()):
        head = "".join(f'<th scope="col">{inline(c, pictures)}</th>' for c in table_cells(lines[0]))
        rows = [[f"<td>{inline(c, pictures)}</td>" for c in table_cells(line)]
                for line in lines[2:]]
        body = "\n".join("<tr>" + "".join(row) + "</tr>" for row in rows)
        return (f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>\n'
                f"<tbody>\n{body}\n</tbody></table></div>")
    if kind == "list":
        items = "\n".join(f"<li>{inline(line[2:], pictures)}</li>" for line in lines)
        return f"<ul>\n{items}\n</ul>"
    if kind == "heading":
        hashes, title = _HEADING.match(lines[0]).groups()
        level = len(hashes)
        return f'<h{level} id="{slug(title)}">{inline(title, pictures)}</h{level}>'
    return "<p>" + "<br>\n".join(inline(line, pictures) for line in lines) + "</p>"


def html_document(markdown: str, base_dir: Path, embed_max_mb: float,
                  embed_total_mb: float | None = None, roots: Sequence[Path] = (),
                  lang: str = "en") -> str:
    """The whole page for the report's Markdown; pictures within the ``embed_*_mb`` budgets."""
    total = None if embed_total_mb is None else int(float(embed_total_mb) * 2**20)
    pictures = Pictures(base_dir, int(float(embed_max_mb) * 2**20), total, roots, lang)
    blocks = []
    for kind, group in itertools.groupby(markdown.splitlines(), key=_kind):
        lines = list(group)
        if kind == "heading":
            blocks += [_block(kind, [line], pictures) for line in lines]
        elif kind != "blank":
            blocks.append(_block(kind, lines, pictures))
    titles = [m.group(2) for m in map(_HEADING.match, markdown.splitlines())
              if m and m.group(1) == "##"]
    items = "".join(f'<li><a href="#{slug(t)}">{html.escape(t)}</a></li>' for t in titles)
    contents = f"<nav><ul>{items}</ul></nav>" if titles else ""
    note = "" if not pictures.linked else '<p class="note">{}</p>\n'.format(word(
        "h_linked", lang, n=str(pictures.linked), mb=f"{embed_total_mb:g}"))
    return (f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{word('h_title', lang)}</title>\n<style>\n{PAGE['style']}</style>\n</head>\n"
            "<body>\n"
            f"{contents}\n<main>\n{note}" + "\n\n".join(blocks) + "\n</main>\n"
            f"<script>\n{PAGE['script']}</script>\n</body>\n</html>\n")
