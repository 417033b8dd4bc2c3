"""msprobe (mindstudio-probe) beside ascendbench: its numbers, its dump directories, its own dump
and compare run in clean child processes of a job (``compare.msprobe=true``)."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from ascendbench.compare.files import UnusableInput
from ascendbench.errors import MissingPackageError

PIN = "26.2.0"  # the mindstudio-probe release whose dump layout and compare columns are used
SIDES = {"reference": "msprobe", "device": "msprobe-device"}  # ascendbench.baseline modes
FLAGGED = ("error", "warning")  # msprobe's Result values that flag a row
NUMBERS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio")
COLUMNS = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
           "Bench Tensor Shape", *NUMBERS, "Verdict (ascendbench)", "Failed rules (ascendbench)")
DTYPE_FLAG = "error: The dtype of NPU and Bench are inconsistent."  # its DTypeErrChecker's message


def require() -> None:
    """A :class:`MissingPackageError` paragraph when msprobe cannot be imported."""
    if importlib.util.find_spec("msprobe") is None:
        raise MissingPackageError(
            f"compare.msprobe=true runs msprobe's own PrecisionDebugger and compare, but msprobe "
            f"is not installed. Install the tested release (it does not replace torch): "
            f"`pip install mindstudio-probe=={PIN}` (or the extra `ascendbench[msprobe]`), or run "
            "without compare.msprobe.")


def msprobe_numbers(npu: torch.Tensor, bench: torch.Tensor) -> dict[str, float]:
    """msprobe 26.2.0's real-data numbers of one pair, under its column names: values as its
    ``read_pt_data`` gives them (bfloat16 to float32, squeezed: pytorch/compare/utils.py:28-55),
    float64 for cosine, distances and MaxAbsErr (core/compare/utils.py:1240-1249), the relative
    error |(n - b) / b| in their result type, eps added where b == 0 (utils.py:1252-1272)."""
    n, b = ((t.float() if t.dtype == torch.bfloat16 else t).detach().cpu().squeeze().numpy()
            for t in (npu, bench))
    kind = np.result_type(n, b, np.float32)
    nr, br = n.astype(kind), b.astype(kind)
    zero = br == 0
    nr[zero] += np.finfo(kind).eps
    br[zero] += np.finfo(kind).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs((nr - br) / br)
    nf, bf = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    norms = np.linalg.norm(nf) * np.linalg.norm(bf)
    cosine = float(nf @ bf / norms) if norms > 0 else (1.0 if not nf.any() else float("nan"))
    return {"Cosine": cosine, "EucDist": float(np.linalg.norm(nf - bf)),
            "MaxAbsErr": float(np.max(np.abs(nf - bf))), "MaxRelativeErr": float(rel.max()),
            "One Thousandth Err Ratio": float((rel < 0.001).mean()),
            "Five Thousandths Err Ratio": float((rel < 0.005).mean())}


def msprobe_rows(reference: Mapping[str, torch.Tensor], candidate: Mapping[str, torch.Tensor],
                 judged: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``compare_msprobe.csv``: per output msprobe's names and numbers, computed as msprobe
    computes them, and ascendbench's own verdict in columns of its own (not msprobe's Result)."""
    return [{"NPU Name": n, "Bench Name": n, "NPU Dtype": str(candidate[n].dtype),
             "Bench Dtype": str(reference[n].dtype),
             "NPU Tensor Shape": str(list(candidate[n].shape)),
             "Bench Tensor Shape": str(list(reference[n].shape)),
             **msprobe_numbers(candidate[n], reference[n]),
             "Verdict (ascendbench)": judged[n]["result"],
             "Failed rules (ascendbench)": judged[n]["message"]} for n in sorted(reference)]


def dump_dir(path: str | Path) -> Path | None:
    """The directory holding ``dump.json``: ``path`` or its one proc/rank directory (a step
    directory); ``None`` when ``path`` is no msprobe dump."""
    path = Path(path)
    if (path / "dump.json").is_file():
        return path
    found = sorted(d for d in path.iterdir() if (d / "dump.json").is_file()) \
        if path.is_dir() else []
    if len(found) > 1:
        names = ", ".join(d.name for d in found)
        raise UnusableInput(f"{path} holds {len(found)} msprobe dumps ({names}); give one of them")
    return found[0] if found else None


def _tensors_of(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, Mapping):
        return [value] if "data_name" in value else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return []


def read_dump(directory: Path) -> dict[str, torch.Tensor]:
    """The forward output tensors of a dump in execution order, named by their ``data_name``
    without ``.pt``. Names in dump.json are data: a plain file of ``dump_tensor_data`` only."""
    try:
        data = json.loads((directory / "dump.json").read_text()).get("data") or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise UnusableInput(f"{directory / 'dump.json'} is not msprobe's dump.json: {exc}") from exc
    if data and not isinstance(data, Mapping):
        raise UnusableInput(f"{directory / 'dump.json'}: `data` is not a mapping")
    folder = (directory / "dump_tensor_data").resolve()
    tensors = {}
    for entry in data.values():
        for item in _tensors_of(entry.get("output") if isinstance(entry, Mapping) else None):
            name = str(item["data_name"])
            path = (folder / name).resolve()
            if Path(name).name != name or not name.endswith(".pt") or path.parent != folder:
                raise UnusableInput(f"dump.json names tensor file {name!r}, not a file of {folder}")
            if path.is_file():
                tensors[name[:-3]] = torch.load(path, map_location="cpu", weights_only=True)
    if not tensors:
        raise UnusableInput(f"{directory} has no forward output tensors (task: tensor dumps them)")
    return tensors


def msprobe_flags(out: Path) -> dict[str, Any]:
    """msprobe's result file in ``out``: its rows, how many it flags, the first flagged row."""
    files = sorted(out.glob("compare_result*.csv")) if out.is_dir() else []
    if not files:
        return {"result_csv": None, "rows": 0, "first_flagged": None}
    with open(files[-1], newline="") as handle:
        rows = list(csv.DictReader(handle))
    flagged = [r for r in rows if r.get("Result") in FLAGGED]
    other = [r for r in flagged if str(r.get("Err_message")).replace(DTYPE_FLAG, "").count(":")]

    def named(row: Mapping[str, str] | None) -> dict[str, Any] | None:
        return row and {"name": row.get("NPU Name"), "result": row.get("Result"),
                        "err_message": row.get("Err_message")}

    return {"result_csv": str(files[-1]), "rows": len(rows), "flagged": len(flagged),
            "first_flagged": named(flagged[0] if flagged else None),
            "first_flagged_not_dtype": named(other[0] if other else None)}


def describe(info: Mapping[str, Any]) -> str:
    """The summary line of a job's ``compare.msprobe`` section."""
    if "skipped" in info:
        return f"skipped: {info['skipped']}"
    first, other = info.get("first_flagged") or {}, info.get("first_flagged_not_dtype") or {}
    text = (f"dumps {info.get('size_mb')} MB ({info.get('reference')}, {info.get('device')}); "
            f"msprobe flags {info.get('flagged', 0)} of {info.get('rows')} rows, first "
            f"{first.get('name', 'none')} {first.get('err_message', '')}")
    if other and other is not first and other.get("name") != first.get("name"):
        text += (f"; first flagged for more than the dtype difference (reference precision): "
                 f"{other['name']} {other['err_message']}")
    return f"{text}; ascendbench's first divergent entry: {info.get('first_divergent') or 'none'}"


def folder_mb(path: Path) -> float:
    """Megabytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


@contextlib.contextmanager
def dumping(dump_path: Path, level: str, module: Any) -> Any:
    """msprobe's PrecisionDebugger (task tensor, ``level``, step 0) around the block, hooked on
    ``module`` (a pipeline: its torch modules). Its config file is written beside the dump."""
    from msprobe.pytorch import PrecisionDebugger

    config = {"task": "tensor", "dump_path": str(dump_path), "rank": [], "step": [0],
              "level": level, "async_dump": False,
              "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
    path = dump_path.parent / f"{dump_path.name}_config.json"
    path.write_text(json.dumps(config, indent=1))
    modules = module if isinstance(module, torch.nn.Module) else [
        m for m in (getattr(module, "components", None) or {}).values()
        if isinstance(m, torch.nn.Module)]
    debugger = PrecisionDebugger(config_path=str(path))
    debugger.start(model=modules)
    try:
        yield
    finally:
        debugger.stop()
        debugger.step()
