"""README back-fill: ``<!-- ascendbench:<name> -->`` pairs and placeholder tables filled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from ascendbench.errors import OutputWriteError, ReportError
from ascendbench.fileio import write_atomic

SECTIONS = ("accuracy", "per_resolution", "layers", "performance", "recommendation", "environment",
            "failures", "dry_runs", "cross_device", "plots", "artifacts", "variants", "profile",
            "pivot", "seed_layouts", "flux2_accuracy", "flux2_performance", "flux2_speedup",
            "flux2_dtype", "sulphur2_accuracy", "sulphur2_performance", "vae_layer",
            "videoflextok_gates")
LEGACY_SECTION = "per_resolution"  # what the seed's ACCURACY_TABLE pair and placeholder rows hold
PLACEHOLDER = "待实测填充"  # the Sulphur-2 seed's "to be measured" cell
KEYS = 3  # a placeholder row is found by its resolution, frames and steps cells
# a marker counts alone on its line (a pair may share one line): not inside a sentence about it
_OWN = r"(?=[ \t]*(?:\n|$|<!--))"
_MARKER = re.compile(r"^[ \t]*(<!--\s*ascendbench:(?P<name>[\w-]+)\s*-->)" + _OWN
                     + r"(?P<body>.*?)(<!--\s*/ascendbench:(?P=name)\s*-->)[ \t]*$",
                     re.DOTALL | re.MULTILINE)
_LEGACY = re.compile(r"^[ \t]*(<!--\s*ACCURACY_TABLE_BEGIN\s*-->)" + _OWN
                     + r"(?P<body>.*?)(<!--\s*ACCURACY_TABLE_END\s*-->)[ \t]*$",
                     re.DOTALL | re.MULTILINE)
_MENTION = re.compile(r"<!--\s*(/?ascendbench:[\w-]+|ACCURACY_TABLE_(BEGIN|END))\s*-->")


def marker_names(text: str) -> list[str]:
    """Section names of the marker pairs in ``text`` (the legacy pair is ``per_resolution``)."""
    return [m.group("name") for m in _MARKER.finditer(text)] + [LEGACY_SECTION] * len(
        _LEGACY.findall(text))


def _cells(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.strip().split("\t")]
    return [c.strip() for c in line.strip().strip("|").split("|")]


def fill_placeholders(text: str, table: str) -> tuple[str, int]:
    """Placeholder rows of ``text`` filled from ``table`` by key columns; text, rows unfilled."""
    rows = [_cells(line) for line in table.splitlines() if line.startswith("|")]
    by_key = {tuple(r[:KEYS]): r for r in rows[2:]}  # below the header and its |---| line
    lines, left = text.split("\n"), 0
    for number, line in enumerate(lines):
        if PLACEHOLDER not in line:
            continue
        cells = _cells(line)
        found = by_key.get(tuple(cells[:KEYS]))
        if found is None or len(found) != len(cells):
            left += 1
        else:
            lines[number] = "\t".join(found) if "\t" in line else "| " + " | ".join(found) + " |"
    return "\n".join(lines), left


def fill(text: str, render: Callable[[str], str]) -> tuple[str, list[str]]:
    """Each known marker pair's body replaced by ``render(name)``; the text, unknown names."""
    unknown: list[str] = []

    def replace(match: re.Match, name: str) -> str:
        if name not in SECTIONS:
            unknown.append(name)
            return match.group(0)
        body = render(name).strip().replace("\\<!--", "<!--")
        body = body.replace("<!--", "&lt;!--").replace("-->", "--&gt;")
        if PLACEHOLDER in match.group("body") and "\n|" not in f"\n{body}":
            return match.group(0)  # nothing measured yet: the author's placeholders stay
        return f"{match.group(1)}\n{body}\n{match.group(match.re.groups)}"

    text = _MARKER.sub(lambda m: replace(m, m.group("name")), text)
    return _LEGACY.sub(lambda m: replace(m, LEGACY_SECTION), text), unknown


def _no_marker(path: Path, text: str) -> ReportError:
    mentions = [f"line {n}: {line.strip()[:80]!r}" for n, line in enumerate(text.splitlines(), 1)
                if _MENTION.search(line)]
    where = (f" Markers inside a sentence do not count ({'; '.join(mentions)}): put each on a line "
             "of its own." if mentions else "")
    return ReportError(
        f"{path} holds no ascendbench marker on a line of its own and no placeholder table (rows "
        f"of {PLACEHOLDER}).{where} Add a pair such as `<!-- ascendbench:accuracy -->` / "
        f"`<!-- /ascendbench:accuracy -->` (sections: {', '.join(SECTIONS)}) or the seed's "
        "`<!-- ACCURACY_TABLE_BEGIN -->` / `<!-- ACCURACY_TABLE_END -->`, then run it again.")


def backfill_file(path: Path, render_for: Callable[[Path], Callable[[str], str]]) -> list[str]:
    """Back-fill ``path`` in place; what was left untouched (ReportError: nothing to fill in it)."""
    path = Path(path).resolve()  # a README that is a link is filled where it lives
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise ReportError(f"README to back-fill {str(path)!r} {what}. Pass an existing "
                          "Markdown file: `make report README=path/to/README.md`.")
    try:
        original = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ReportError(
            f"README to back-fill {path} is not UTF-8 text ({exc}); nothing was written to it. "
            "Convert it (`iconv -f GBK -t UTF-8`) and run it again.") from None
    if not marker_names(original) and PLACEHOLDER not in original:
        raise _no_marker(path, original)
    render = render_for(path.parent)
    updated, unknown = fill(original, render)
    left = 0
    if PLACEHOLDER in updated:
        updated, left = fill_placeholders(updated, render(LEGACY_SECTION))
    if updated != original:
        try:  # whole or not at all: never a cut tail
            write_atomic(path, updated, mode=path.stat().st_mode & 0o7777)
        except OutputWriteError as exc:
            raise ReportError(f"the README was not changed: {exc}") from None
    return [f"unknown marker {name}" for name in unknown] + [
        f"{left} placeholder row(s) with no judged run of their size"] * bool(left)
