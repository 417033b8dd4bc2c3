"""Layer captures kept in a job directory, so that the run can later be the reference (``baseline.source``) of a
layer comparison -- per-layer table and first divergent module -- on another machine.

A job with ``compare.layers`` writes ``tensors/layers_device.json``: the mode, the capture order and what was
dropped, plus, for ``compare.layers=all``, each module's statistics (``tensors/layers_device.safetensors``
holds the captured tensors of pattern mode). A job whose reference is such a saved run reads them back with
:func:`saved_layers`. They are data: the paths come from the saved record and must resolve inside its
directory, and the JSON is checked for shape before anything is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascendbench.fileio import atomic_path

META = "layers_device_meta"
TENSORS = "layers_device"


def save_device_layers(job: Any, spec: Any, capture: Any) -> dict[str, str]:
    """Write the device capture's description (and statistics in ``all`` mode); the artifacts entry."""
    meta: dict[str, Any] = {"mode": "all" if spec == "all" else "patterns", "order": list(capture.order)}
    if spec == "all":
        meta["modules"] = capture.modules
    else:
        meta["dropped"] = list(capture.dropped)
    path = job.dir / "tensors" / "layers_device.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(meta))
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
    """The saved run's layer capture in the form the comparison takes, or ``(None, why not)``.

    Args:
        run: the :class:`ascendbench.baseline.source.SavedRun` of the reference.
        spec: this job's normalised ``compare.layers`` (``"all"`` or patterns).
    """
    if run.record_path is None:
        return None, "the reference is a bare tensors file: no layer captures"
    root = run.record_path.parent
    artifacts = run.record.get("artifacts") if isinstance(run.record.get("artifacts"), dict) else {}
    meta_path = _inside(root, artifacts.get(META))
    if meta_path is None:
        return None, ("the saved run kept no layer captures (it ran without compare.layers, or with an ascendbench "
                      "that did not keep them): run it again with compare.layers set")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"{meta_path} cannot be read ({exc})"
    mode = "all" if spec == "all" else "patterns"
    if not isinstance(meta, dict) or meta.get("mode") != mode:
        return None, (f"the saved run captured layers in mode {meta.get('mode') if isinstance(meta, dict) else '?'}, "
                      f"this job asks for {mode}: run both with the same compare.layers")
    if mode == "all":
        return (meta["modules"], None) if _modules_ok(meta.get("modules")) else (None, f"{meta_path}: bad modules")
    return _pattern_capture(root, artifacts, meta, meta_path)


def _pattern_capture(root: Path, artifacts: dict[str, Any], meta: dict[str, Any],
                     meta_path: Path) -> tuple[Any, str | None]:
    from safetensors.torch import load_file

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
