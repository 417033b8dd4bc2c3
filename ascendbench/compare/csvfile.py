"""``compare.csv``: a row per output, layer or module, with its verdict and failed rules."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch

from ascendbench.fileio import write_atomic
from ascendbench.metrics.verdict import worst
from ascendbench.precision import dtype_name

# Output metrics that get a column (the record keeps all of them).
OUTPUT_COLUMNS = ("max_abs_err", "mean_rel_err", "max_rel_err", "cosine", "psnr_db",
                  "allclose_mismatch_ratio", "nonfinite_mismatch", "image_psnr_db", "image_ssim",
                  "image_lpips", "video_psnr_db_mean", "video_psnr_db_min", "video_ssim_mean",
                  "video_ssim_min", "video_lpips_mean", "token_agreement", "tokens_out_of_range")


def output_entries(metrics: Mapping[str, Any], output: str, several: bool) -> dict[str, Any]:
    """The metric entries of one output (named ``<output>/<metric>`` when there are several)."""
    prefix = f"{output}/" if several else ""
    return {k[len(prefix):]: v for k, v in metrics.items() if isinstance(v, Mapping)
            and (k.startswith(prefix) if several else "/" not in k)}


def judged_row(name: str, kind: str, reference: torch.Tensor, device: torch.Tensor,
               entries: Mapping[str, Mapping[str, Any]], columns: Sequence[str]) -> dict[str, Any]:
    """A row: shapes, dtypes, the values of ``columns``, the worst verdict and the failed rules."""
    judged = [(m, e) for m, e in entries.items() if e.get("verdict")]
    bad = [f"{m} {e['value']:.4g} {e['verdict']} ({e['rule']})" for m, e in judged
           if e["verdict"] != "PASS" and isinstance(e.get("value"), (int, float))]
    bad += [f"{m} not judged: {e['not_judged']}" for m, e in entries.items() if "not_judged" in e]
    row: dict[str, Any] = {"name": name, "kind": kind, "shape": list(reference.shape),
                           "ref_dtype": dtype_name(reference.dtype),
                           "dev_dtype": dtype_name(device.dtype)}
    row.update({m: entries[m]["value"] for m in columns if "value" in entries.get(m, {})})
    row.update(result=worst(e["verdict"] for _, e in judged) or "", message="; ".join(bad))
    return row


def output_rows(reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per output."""
    return [judged_row(out, "output", reference[out], device[out],
                       output_entries(metrics, out, len(reference) > 1), columns=OUTPUT_COLUMNS)
            for out in sorted(reference)]


def _cell(value: Any, blank_nan: bool) -> Any:
    if blank_nan and isinstance(value, float) and math.isnan(value):
        return ""
    return "x".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


def write_compare_csv(path: Path, rows: Iterable[Mapping[str, Any]],
                      columns: Sequence[str] | None = None) -> Path:
    """Write the rows atomically (no ``entries``) in ``columns``, else name, kind, the values,
    result and message."""
    rows, blank_nan = list(rows), columns is not None
    if columns is None:
        columns = ["name", "kind"]
        for row in rows:
            columns += [k for k in row if k not in (*columns, "result", "message", "entries")]
        columns += ["result", "message"]
    handle = io.StringIO(newline="")
    writer = csv.DictWriter(handle, fieldnames=list(columns))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k, ""), blank_nan) for k in columns})
    return write_atomic(path, handle.getvalue())
