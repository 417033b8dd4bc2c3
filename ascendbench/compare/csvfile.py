"""``compare.csv``: one row per compared output, layer or module, msprobe style (``result``, ``message``).

Rows of different kinds share one header (the union of their columns); ``name`` and ``kind`` lead,
``result`` and ``message`` close every row. Output rows are built from the record's metric entries.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

from ascendbench.fileio import write_atomic
from ascendbench.metrics.verdict import worst
from ascendbench.precision import dtype_name

# Output metrics that get a column (the record keeps all of them).
OUTPUT_COLUMNS = ("max_abs_err", "mean_rel_err", "max_rel_err", "cosine", "psnr_db", "allclose_mismatch_ratio",
                  "nonfinite_mismatch", "image_psnr_db", "image_ssim", "image_lpips", "video_psnr_db_mean",
                  "video_psnr_db_min", "video_ssim_mean", "video_ssim_min", "video_lpips_mean", "token_agreement",
                  "tokens_out_of_range")


def output_entries(metrics: Mapping[str, Any], output: str, several: bool) -> dict[str, Any]:
    """The metric entries of one output (``<output>/<metric>`` when the job has several outputs)."""
    if several:
        prefix = f"{output}/"
        return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}
    return {k: v for k, v in metrics.items() if "/" not in k}


def output_rows(reference: Mapping[str, torch.Tensor], device: Mapping[str, torch.Tensor],
                metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per output: key metric values, the worst verdict and the rules that did not pass."""
    rows = []
    for output in sorted(reference):
        entries = output_entries(metrics, output, len(reference) > 1)
        judged = {m: e for m, e in entries.items() if isinstance(e, Mapping) and e.get("verdict")}
        row: dict[str, Any] = {"name": output, "kind": "output", "shape": list(reference[output].shape),
                               "ref_dtype": dtype_name(reference[output].dtype),
                               "dev_dtype": dtype_name(device[output].dtype)}
        row.update({m: entries[m].get("value") for m in OUTPUT_COLUMNS if m in entries and "value" in entries[m]})
        bad = [f"{m} {e['value']:.4g} {e['verdict']} ({e['rule']})" for m, e in judged.items()
               if e["verdict"] != "PASS" and isinstance(e.get("value"), (int, float))]
        row.update(result=worst(e["verdict"] for e in judged.values()) or "", message="; ".join(bad))
        rows.append(row)
    return rows


def _cell(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "x".join(str(v) for v in value)
    return value


def write_compare_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write the rows (internal ``entries`` fields dropped) with a shared header."""
    rows = [{k: v for k, v in row.items() if k != "entries"} for row in rows]
    columns = ["name", "kind"]
    for row in rows:
        columns += [k for k in row if k not in columns and k not in ("result", "message")]
    columns += ["result", "message"]
    handle = io.StringIO(newline="")
    writer = csv.DictWriter(handle, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k, "")) for k in columns})
    return write_atomic(path, handle.getvalue())  # whole or not at all
