"""``python -m ascendbench.compare REF CAND``: two saved outputs judged with a job's metric suites and rules.

The comparison composes the same config a job would (``metric=<suite>``, ``dtype=<the candidate's dtype>``
with its tolerances and verdict rules, ``--set`` overrides), so its numbers equal the job's numbers on the
same tensors. ``--atol``/``--rtol`` set the allclose tolerances and make ``allclose_mismatch_ratio`` a
judged rule (``max: 0``: every element within ``atol + rtol * |ref|``), the LTX-VAE seed's
``compare_outputs.py --atol 0.01 --rtol 0.001``. Results: ``record.json``, ``compare.csv`` and an
msprobe-named copy ``compare_msprobe.csv`` (plus side-by-side pictures with ``--pictures``) in the
output directory; exit 0 on PASS/WARN, 1 on FAIL, 2 on unusable input.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.compare.files import UnusableInput, pair_outputs, read_outputs
from ascendbench.fileio import write_atomic
from ascendbench.precision import dtype_name

MSPROBE_COLUMNS = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                   "Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
                   "Accuracy Reached or Not", "Err_message")
HALF_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


@dataclass
class CompareRequest:
    """What to compare and how (the command line, parsed)."""

    reference: Path
    candidate: Path
    out: Path
    metric: str | None = None
    dtype: str | None = None
    atol: float | None = None
    rtol: float | None = None
    overrides: list[str] = field(default_factory=list)
    pictures: bool = False


def infer_metric(tensors: Mapping[str, torch.Tensor]) -> str:
    """``tokens`` for integer outputs, ``image`` for [N, 1|3, H, W], else ``regression``.

    A 5-D tensor is not taken for a video unless said (``--metric video``): a layer's activations
    ``[1, 1024, 2, 8, 8]`` are 5-D too, and have no colour axis.
    """
    first = next(iter(tensors.values()))
    if not first.is_floating_point():
        return "tokens"
    if first.dim() == 4 and first.shape[1] in (1, 3):
        return "image"
    return "regression"


RECORD_DEPTH = 3  # how many directories above the candidate file are searched for the job's record.json


def record_dtype(path: Path) -> tuple[str, Path] | None:
    """``(job.dtype, record path)`` of the job record beside (or above) ``path``, when it names a device dtype.

    The record is data: only a known dtype name is taken from it, nothing else.
    """
    here = Path(path).resolve()
    for folder in [here if here.is_dir() else here.parent, *here.parents][:RECORD_DEPTH + 1]:
        record = folder / "record.json"
        if record.is_file():
            try:
                dtype = (json.loads(record.read_text()).get("job") or {}).get("dtype")
            except (OSError, ValueError, AttributeError):
                return None
            return (dtype, record) if dtype in ("float32", *HALF_NAMES.values()) else None
    return None


def infer_dtype(tensors: Mapping[str, torch.Tensor], path: Path | None = None) -> tuple[str, str]:
    """``(dtype, where from)``: the candidate's own half dtype, else the job record beside the file (a bf16 run
    saved as float32 .npy, numpy having no bfloat16), else float32."""
    own = HALF_NAMES.get(next(iter(tensors.values())).dtype)
    if own:
        return own, "the candidate file's dtype"
    found = record_dtype(path) if path is not None else None
    if found:
        return found[0], f"job.dtype of {found[1]}"
    return "float32", "the candidate file's dtype"


def compose(request: CompareRequest, metric: str, dtype: str) -> Any:
    """The job config of this comparison (nothing else of it is used)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    overrides = [f"metric={metric}", f"dtype={dtype}", "device=cpu"]
    overrides += [f"dtype.atol={request.atol}"] if request.atol is not None else []
    overrides += [f"dtype.rtol={request.rtol}"] if request.rtol is not None else []
    if request.atol is not None or request.rtol is not None:
        overrides.append("+metric.thresholds.allclose_mismatch_ratio={max: 0.0, source: 'compare --atol/--rtol: "
                         "every element within atol + rtol * |ref|'}")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides + list(request.overrides))
    finally:
        GlobalHydra.instance().clear()


def _side(path: Path, tensors: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    from ascendbench.tasks.inputs import summarize

    return {"path": str(path), "tensors": summarize(tensors)}


def _msprobe_rows(reference, candidate, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    from ascendbench.compare.csvfile import output_entries
    from ascendbench.metrics.verdict import worst

    rows = []
    for name in sorted(reference):
        entries = output_entries(metrics, name, len(reference) > 1)
        value = {k: (e.get("value") if isinstance(e, Mapping) else None) for k, e in entries.items()}
        ref, cand = reference[name].double(), candidate[name].double()
        rel = (cand - ref).abs() / ref.abs().clamp_min(1e-12)
        verdict = worst(e.get("verdict") for e in entries.values() if isinstance(e, Mapping))
        failing = [k for k, e in entries.items() if isinstance(e, Mapping) and e.get("verdict") == "FAIL"]
        rows.append({"NPU Name": name, "Bench Name": name, "NPU Dtype": dtype_name(candidate[name].dtype),
                     "Bench Dtype": dtype_name(reference[name].dtype), "NPU Tensor Shape": list(cand.shape),
                     "Bench Tensor Shape": list(ref.shape), "Cosine": value.get("cosine"),
                     "MaxAbsErr": value.get("max_abs_err"), "MaxRelativeErr": value.get("max_rel_err"),
                     "One Thousandth Err Ratio": float((rel <= 1e-3).double().mean()) if rel.numel() else None,
                     "Five Thousandths Err Ratio": float((rel <= 5e-3).double().mean()) if rel.numel() else None,
                     "Accuracy Reached or Not": "No" if verdict == "FAIL" else "Yes",
                     "Err_message": "; ".join(failing)})
    return rows


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...] | None = None) -> None:
    columns = columns or tuple(dict.fromkeys(k for row in rows for k in row))
    handle = io.StringIO(newline="")
    writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                         for k, v in row.items()})
    write_atomic(path, handle.getvalue())


def run_compare(request: CompareRequest) -> tuple[int, dict[str, Any]]:
    """Compare and write the results; (exit code, record). Raises :class:`UnusableInput` on bad input."""
    from ascendbench.compare.csvfile import output_rows, write_compare_csv
    from ascendbench.config.targets import build
    from ascendbench.metrics import worst
    from ascendbench.precision import Precision

    reference, candidate = pair_outputs(read_outputs(request.reference), read_outputs(request.candidate))
    metric = request.metric or infer_metric(reference)
    dtype, dtype_from = (request.dtype, "--dtype") if request.dtype else infer_dtype(candidate, request.candidate)
    cfg = compose(request, metric, dtype)
    precision = Precision.build(cfg, "cpu")  # the metric suite with the dtype rules, as a job evaluates
    metrics = build(cfg.metric, "metric").evaluate(reference, candidate, dict(precision.rules), **precision.allclose())
    verdict = worst(m.get("verdict") for m in metrics.values() if isinstance(m, Mapping))
    record = {"status": "ok", "verdict": verdict, "metric": metric, "dtype_rules": dtype, "dtype_from": dtype_from,
              "allclose": {"atol": float(cfg.dtype.atol), "rtol": float(cfg.dtype.rtol)},
              "reference": _side(request.reference, reference), "candidate": _side(request.candidate, candidate),
              "metrics": metrics}
    request.out.mkdir(parents=True, exist_ok=True)
    write_compare_csv(request.out / "compare.csv", output_rows(reference, candidate, metrics))
    _write_csv(request.out / "compare_msprobe.csv", _msprobe_rows(reference, candidate, metrics), MSPROBE_COLUMNS)
    if request.pictures:
        from ascendbench.compare.visual import render_output

        record["pictures"] = [str(p.name) for name in reference
                              for p in render_output(name, reference[name], candidate[name], request.out, {})]
    write_atomic(request.out / "record.json", json.dumps(record, indent=1, default=str))
    return (1 if verdict == "FAIL" else 0), record


__all__ = ["CompareRequest", "UnusableInput", "run_compare", "infer_metric", "infer_dtype"]
