"""Cell formatting and Markdown tables: every absent value prints as ``missing``, never a guess."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ascendbench.digits import judged_rule, judged_value

MISSING = "missing"


def present(value: Any) -> bool:
    """True when a cell holds a value (not ``None``/``NaN``/absent)."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (value is pd.NA or value is pd.NaT)


def num(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits; ``missing`` when absent."""
    if not present(value):
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if 1e4 <= abs(value) < 1e15:
            return f"{value:.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def entry_of(row: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The metric entry a flat row holds under ``prefix`` (``metrics.<name>``, ``hidden.<check>``)."""
    return {key: get(row, f"{prefix}.{key}") for key in ("value", "verdict", "rule", "threshold")}


def judged(row: Mapping[str, Any], prefix: str, metric: str) -> tuple[str, str | None, str]:
    """``(value text, verdict, rule text)`` of the entry under ``prefix``: the value printed with the digits
    its rule needs (never rounded across a bound), in % where the seeds use % (mean relative error)."""
    entry = entry_of(row, prefix)
    if entry["value"] is None:
        return MISSING, entry["verdict"], MISSING
    rule = judged_rule(metric, entry) if entry["rule"] is not None or entry["threshold"] is not None else MISSING
    verdict = entry["verdict"] if entry["verdict"] is None else md_escape(entry["verdict"])
    return md_escape(judged_value(metric, entry)), verdict, md_escape(rule)  # record text: inert in Markdown


_MD_ACTIVE = re.compile(r"[\\`*\[\]]|<(?=[A-Za-z/!?])")  # links, images, code, bold, an HTML tag or comment


def md_escape(value: str) -> str:
    """Record text made inert in Markdown: ``\\ ` * [ ]`` and a ``<`` that could open a tag or comment are
    backslash-escaped, so ``![x](/abs.png)``, ``[a](//evil)`` and ``<script>`` stay plain text (``<=`` stays).

    >>> print(md_escape("<script> ![a](b) <= 2"))
    \\<script> !\\[a\\](b) <= 2
    """
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), str(value))


def text(value: Any) -> str:
    """Any cell as text (Markdown-escaped: see :func:`md_escape`); ``missing`` when absent."""
    return num(value) if isinstance(value, (int, float)) else (md_escape(value) if present(value) else MISSING)


def get(row: Mapping[str, Any], key: str) -> Any:
    """``row[key]`` or ``None`` when the column is absent or the cell is empty."""
    value = row.get(key)
    return value if present(value) else None


def size_label(row: Mapping[str, Any]) -> str:
    """``HxW``, or ``HxWxF`` when the task uses frames (``job.num_frames``), from the record's job fields; a layer
    task's ``input [1,128,2,8,8]`` (``job.sizes.input_shape``)."""
    shape = get(row, "job.sizes.input_shape")
    if shape is not None and get(row, "job.sizes.height") is None:  # one layer: its input, not the preset's image
        return f"input {shape}".replace(", ", ",")
    height, width, frames = get(row, "job.height"), get(row, "job.width"), get(row, "job.num_frames")
    if height is None or width is None:
        return MISSING
    label = f"{num(height)}x{num(width)}"
    return f"{label}x{num(frames)}" if frames is not None else label


def workload_label(row: Mapping[str, Any]) -> str:
    """``mini @ 1024x1024``: the preset's name with the size the job ran, from the record's job fields (a size
    override such as ``preset.height=1024`` on ``preset=mini`` shows as what ran, not as the preset's default)."""
    preset, size = get(row, "job.preset"), size_label(row)
    if preset is None:
        return size
    return str(md_escape(preset)) if size == MISSING else f"{md_escape(preset)} @ {size}"


def relative(target: Path | str, base_dir: Path | str) -> str:
    """Path of ``target`` relative to ``base_dir`` with forward slashes (for Markdown links)."""
    return Path(os.path.relpath(Path(target).resolve(), Path(base_dir).resolve())).as_posix()


def link(label: str, target: Path | str, base_dir: Path | str) -> str:
    """A Markdown link to ``target`` relative to ``base_dir``."""
    rel = relative(target, base_dir)
    if any(c in rel for c in " ()<>"):
        rel = f"<{rel}>"
    return f"[{label}]({rel})"


def inside(root: Path | str, rel: str) -> Path | None:
    """``root / rel`` resolved (links followed) when it stays inside ``root``; ``None`` when it leaves it (an
    absolute path, ``../``, a symbolic link out): a path from a record points only into its own job dir."""
    base = Path(root).resolve()
    path = (base / rel).resolve()
    return path if path == base or base in path.parents else None


def escape(cell: str) -> str:
    """Make text safe inside a Markdown table cell."""
    return str(cell).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (cells already formatted as text)."""
    lines = ["| " + " | ".join(escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def short(message: Any, limit: int = 400) -> str:
    """First ``limit`` characters of a message on one line (the record keeps the whole text)."""
    one_line = " ".join(str(message).split()) if present(message) else MISSING
    cut = one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
    return md_escape(cut) if present(message) else cut


def metric_matches(name: str, wanted: str) -> bool:
    """True when metric ``name`` is the metric ``wanted``, maybe namespaced (``image/x``, ``image_x``).

    Hidden-state entries (``layer/...``) never match: they are folded per check (see ``report.hidden``).
    """
    if name.startswith("layer/"):
        return False
    base = name.split("/")[-1]
    return base == wanted or base.endswith("_" + wanted)


def times(ratio: float) -> str:
    """A ratio as ``3533x`` (whole numbers from 100 up) or ``2.41x``."""
    if math.isinf(ratio):
        return "infx"
    return f"{ratio:.0f}x" if abs(ratio) >= 100 else f"{ratio:.3g}x"
