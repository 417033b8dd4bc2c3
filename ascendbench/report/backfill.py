"""README back-fill: the body of ``<!-- ascendbench:<name> -->`` pairs (and the Sulphur-2 seed's
``ACCURACY_TABLE`` pair) becomes that section; unknown names stay, a rerun changes nothing."""

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
LEGACY_SECTION = "per_resolution"  # what the seed's ACCURACY_TABLE pair holds
_MARKER = re.compile(r"(<!--\s*ascendbench:(?P<name>[\w-]+)\s*-->)(?P<body>.*?)"
                     r"(<!--\s*/ascendbench:(?P=name)\s*-->)", re.DOTALL)
_LEGACY = re.compile(r"(<!--\s*ACCURACY_TABLE_BEGIN\s*-->)(?P<body>.*?)"
                     r"(<!--\s*ACCURACY_TABLE_END\s*-->)", re.DOTALL)


def marker_names(text: str) -> list[str]:
    """Section names of the marker pairs in ``text`` (the legacy pair is ``per_resolution``)."""
    return [m.group("name") for m in _MARKER.finditer(text)] + [LEGACY_SECTION] * len(
        _LEGACY.findall(text))


def fill(text: str, render: Callable[[str], str]) -> tuple[str, list[str]]:
    """Each known marker pair's body replaced by ``render(name)``; the text, unknown names."""
    unknown: list[str] = []

    def replace(match: re.Match, name: str) -> str:
        if name not in SECTIONS:
            unknown.append(name)
            return match.group(0)
        body = render(name).strip().replace("\\<!--", "<!--")
        body = body.replace("<!--", "&lt;!--").replace("-->", "--&gt;")
        return f"{match.group(1)}\n{body}\n{match.group(match.re.groups)}"

    text = _MARKER.sub(lambda m: replace(m, m.group("name")), text)
    return _LEGACY.sub(lambda m: replace(m, LEGACY_SECTION), text), unknown


def backfill_file(path: Path, render_for: Callable[[Path], Callable[[str], str]]) -> list[str]:
    """Back-fill ``path`` in place (``render_for(base_dir)`` renders sections with links relative
    to its directory); the unknown marker names left untouched.

    Raises:
        ReportError: the file does not exist or holds no ascendbench marker.
    """
    path = Path(path).resolve()  # a README that is a link is filled where it lives
    if not path.is_file():
        raise ReportError(f"README to back-fill {str(path)!r} does not exist. Pass an existing "
                          "Markdown file: `make report README=path/to/README.md`.")
    original = path.read_text()
    if not marker_names(original):
        raise ReportError(
            f"{path} holds no ascendbench marker. Add a pair such as "
            "`<!-- ascendbench:accuracy -->` / `<!-- /ascendbench:accuracy -->` (sections: "
            f"{', '.join(SECTIONS)}) or the seed's "
            "`<!-- ACCURACY_TABLE_BEGIN -->` / `<!-- ACCURACY_TABLE_END -->`, then run it again.")
    updated, unknown = fill(original, render_for(path.parent))
    if updated != original:
        try:  # whole or not at all: never a cut tail
            write_atomic(path, updated, mode=path.stat().st_mode & 0o7777)
        except OutputWriteError as exc:
            raise ReportError(f"the README was not changed: {exc}") from None
    return unknown
