"""The reference-free output checks in the report: one row per job with image or video outputs.

Each cell is the value and its verdict, or for random-init weights (and for checks the reference fails too)
the value with what the rule would say, marked not judged, as the record has it
(:mod:`ascendbench.metrics.output_checks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ascendbench.report.fmt import get, num, size_label, table, text
from ascendbench.report.tables import record_link

CHECKS = (("output_flat_frames", "flat frames"), ("output_black_white_frames", "black/white frames"),
          ("output_spectral_exponent", "spectral exponent"), ("output_frozen_pairs", "frozen pairs"),
          ("output_flicker", "flicker"))


def _cell(row: Mapping[str, Any], check: str) -> str | None:
    cells = []
    for key in row:
        if key.startswith("metrics.") and key.endswith(f"{check}.value") and get(row, key) is not None:
            base = key[: -len(".value")]
            output = base[len("metrics."): -len(check)].rstrip("/")
            verdict = get(row, f"{base}.verdict")
            said = text(verdict) if verdict else f"would be {text(get(row, f'{base}.would_be'))}, not judged"
            cells.append(f"{output + ': ' if output else ''}{num(get(row, key))} {said}")
    return "; ".join(cells) or None


def output_checks_section(rows: Sequence[Mapping[str, Any]], base_dir: Path) -> str:
    """A table of every job's reference-free checks: a check no job ran (frozen pairs and flicker of images) is
    no column; one a job did not run says ``not run`` (an image among videos)."""
    found = [(row, [_cell(row, check) for check, _ in CHECKS]) for row in rows]
    found = [(row, cells) for row, cells in found if any(cells)]
    if not found:
        return "No job wrote image or video outputs, so no reference-free check ran."
    used = [i for i in range(len(CHECKS)) if any(cells[i] for _, cells in found)]
    body = [(text(get(row, "job.model")), text(get(row, "job.device")), text(get(row, "job.dtype")),
             size_label(row), text(get(row, "weights.kind")), *[cells[i] or "not run" for i in used],
             record_link(row, base_dir)) for row, cells in found]
    headers = ("model", "device", "dtype", "size", "weights", *[CHECKS[i][1] for i in used], "record")
    return ("Checks of the outputs themselves, with or without a reference (rules and sources in each record): "
            "flat, black or white frames, noise-like spectra (natural images: exponent ~2), frozen and "
            "flickering video. Random-init weights make noise: reported, not judged.\n\n" + table(headers, body))
