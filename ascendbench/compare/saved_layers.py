"""Layer captures kept in a job directory, for the run to be another's ``baseline.source``.

``tensors/layers_device.json`` holds the mode, capture order and dropped names (``all``: each
module's statistics); pattern mode's tensors are ``tensors/layers_device.safetensors``. Read back
as data: paths must resolve inside the saved directory and the JSON is checked before use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from ascendbench.fileio import write_atomic

META = "layers_device_meta"
TENSORS = "layers_device"


def save_device_layers(job: Any, spec: Any, capture: Any) -> dict[str, str]:
    """Write the device capture's description (and statistics in ``all`` mode); the artifacts entry."""
    meta: dict[str, Any] = {"mode": "all" if spec == "all" else "patterns", "order": capture.order}
    if spec == "all":
        meta["modules"] = capture.modules
    else:
        meta["dropped"] = capture.dropped
    path = write_atomic(job.dir / "tensors" / "layers_device.json", json.dumps(meta))
    return {META: job.relative(path)}


def _inside(root: Path, relative: Any) -> Path | None:
    if not isinstance(relative, str):
        return None
    path = (root / relative).resolve()
    return path if path.is_relative_to(root.resolve()) and path.is_file() else None


def _modules_ok(modules: Any) -> bool:
    return isinstance(modules, list) and all(
        isinstance(m, dict) and isinstance(m.get("key"), str) and isinstance(m.get("inputs"), list)
        and isinstance(m.get("outputs"), list) for m in modules)


def saved_layers(run: Any, spec: Any) -> tuple[Any, str | None]:
    """The saved run's layer capture as the comparison takes it, or ``(None, why not)``.

    Args:
        run: the :class:`ascendbench.baseline.source.SavedRun` of the reference.
        spec: this job's normalised ``compare.layers`` (``"all"`` or patterns).
    """
    if run.record_path is None:
        return None, "the reference is a bare tensors file: no layer captures"
    root = run.record_path.parent
    artifacts = run.record.get("artifacts")
    artifacts = artifacts if isinstance(artifacts, dict) else {}
    meta_path = _inside(root, artifacts.get(META))
    if meta_path is None:
        return None, ("the saved run kept no layer captures (it ran without compare.layers, or "
                      "with an ascendbench that did not keep them): run it again with "
                      "compare.layers set")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{meta_path} cannot be read ({exc})"
    mode = "all" if spec == "all" else "patterns"
    saved = meta.get("mode") if isinstance(meta, dict) else "?"
    if saved != mode:
        return None, (f"the saved run captured layers in mode {saved}, this job asks for {mode}: "
                      "run both with the same compare.layers")
    if mode == "all":
        ok = _modules_ok(meta.get("modules"))
        return (meta["modules"], None) if ok else (None, f"{meta_path}: bad modules")
    tensors_path = _inside(root, artifacts.get(TENSORS))
    order, dropped = meta.get("order"), meta.get("dropped", [])
    if tensors_path is None or not isinstance(order, list) or not isinstance(dropped, list):
        return None, f"{meta_path}: the saved layer tensors are missing or their description is damaged"
    try:
        tensors = load_file(str(tensors_path))
    except Exception as exc:  # safetensors raises its own error type for a damaged file
        return None, f"{tensors_path} cannot be read ({type(exc).__name__}: {exc})"
    order = [name for name in order if isinstance(name, str) and name in tensors]
    return {"tensors": tensors, "order": order, "dropped": [str(d) for d in dropped]}, None
