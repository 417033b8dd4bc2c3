"""README back-fill: replace what sits between ascendbench markers with sections of the report.

Markers (any Markdown file)::

    <!-- ascendbench:accuracy -->  ...  <!-- /ascendbench:accuracy -->
    <!-- ACCURACY_TABLE_BEGIN -->  ...  <!-- ACCURACY_TABLE_END -->     (the Sulphur-2 seed's pair: its
                                                                         per-resolution table, per_resolution)

Known names: see :data:`SECTIONS`. Unknown names are left untouched and reported. Running it again on
its own output changes nothing (the markers stay, only their content is replaced).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Mapping

from ascendbench.errors import OutputWriteError, ReportError
from ascendbench.fileio import write_atomic

SECTIONS = ("accuracy", "per_resolution", "layers", "performance", "recommendation", "environment", "failures",
            "dry_runs", "cross_device", "plots", "artifacts", "variants", "profile", "pivot", "seed_layouts",
            "flux2_accuracy", "flux2_performance", "flux2_speedup", "flux2_dtype", "sulphur2_accuracy",
            "sulphur2_performance", "vae_layer", "videoflextok_gates")
LEGACY_SECTION = "per_resolution"  # what the seed's ACCURACY_TABLE pair holds
_MARKER = re.compile(r"(<!--\s*ascendbench:(?P<name>[\w-]+)\s*-->)(?P<body>.*?)(<!--\s*/ascendbench:(?P=name)\s*-->)",
                     re.DOTALL)
_LEGACY = re.compile(r"(<!--\s*ACCURACY_TABLE_BEGIN\s*-->)(?P<body>.*?)(<!--\s*ACCURACY_TABLE_END\s*-->)", re.DOTALL)


def marker_names(text: str) -> list[str]:
    """Section names of the marker pairs found in ``text`` (the legacy pair counts as ``per_resolution``)."""
    names = [m.group("name") for m in _MARKER.finditer(text)]
    return names + [LEGACY_SECTION] * len(_LEGACY.findall(text))


def inert(body: str) -> str:
    """``body`` with every HTML comment opener/closer made literal (``&lt;!--``, ``--&gt;``): text inside a
    section can never be read as a marker by the next back-fill, whatever a record held.

    >>> inert("x<!-- /ascendbench:failures -->y")
    'x&lt;!-- /ascendbench:failures --&gt;y'
    """
    return body.replace("\\<!--", "<!--").replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def fill(text: str, render: Callable[[str], str]) -> tuple[str, list[str]]:
    """Replace the body of every known marker pair with ``render(name)``; return text and unknown names."""
    unknown: list[str] = []

    def replace(match: re.Match, name: str) -> str:
        if name not in SECTIONS:
            unknown.append(name)
            return match.group(0)
        return f"{match.group(1)}\n{inert(render(name).strip())}\n{match.group(match.re.groups)}"

    text = _MARKER.sub(lambda m: replace(m, m.group("name")), text)
    text = _LEGACY.sub(lambda m: replace(m, LEGACY_SECTION), text)
    return text, unknown


def backfill_file(path: Path, render_for: Callable[[Path], Mapping[str, str] | Callable[[str], str]]) -> list[str]:
    """Back-fill ``path`` in place; ``render_for(base_dir)`` renders sections with links relative to it.

    Returns:
        The unknown marker names left untouched.

    Raises:
        ReportError: the file does not exist or holds no ascendbench marker.
    """
    path = Path(path).resolve()  # a README that is a link is filled where it lives; the link stays a link
    if not path.is_file():
        raise ReportError(f"README to back-fill {str(path)!r} does not exist. Pass an existing Markdown file: "
                          "`make report README=path/to/README.md`.")
    original = path.read_text()
    if not marker_names(original):
        raise ReportError(
            f"{path} holds no ascendbench marker. Add a pair such as `<!-- ascendbench:accuracy -->` / "
            f"`<!-- /ascendbench:accuracy -->` (sections: {', '.join(SECTIONS)}) or the seed's "
            "`<!-- ACCURACY_TABLE_BEGIN -->` / `<!-- ACCURACY_TABLE_END -->`, then run it again."
        )
    renderer = render_for(path.parent)
    render = renderer if callable(renderer) else renderer.__getitem__
    updated, unknown = fill(original, render)
    if updated != original:
        try:
            write_atomic(path, updated, mode=path.stat().st_mode & 0o7777)  # whole or not at all: never a cut tail
        except OutputWriteError as exc:
            raise ReportError(f"the README was not changed: {exc}") from None
    return unknown
