"""``python -m ascendbench.baseline replay``: each module re-run on its recorded device inputs."""

from __future__ import annotations

import gc
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import torch
from safetensors import safe_open

from ascendbench.baseline.bounded import bounded_if_float64
from ascendbench.baseline.process import PROGRESS_PREFIX
from ascendbench.baseline.replay_modules import meta_module
from ascendbench.compare.capture import call_file, decode
from ascendbench.compare.hooks import flatten_tensors
from ascendbench.fileio import write_atomic

CHUNK = 1 << 22  # elements compared at a time: no full-size float64 copy or difference of an output


def local_error(reference: torch.Tensor, device: torch.Tensor) -> dict[str, Any]:
    """``local_rel_err`` ``||dev - ref|| / ||ref||``, max abs error, cosine, chunked in float64."""
    ref_flat, dev_flat = reference.detach().reshape(-1), device.detach().reshape(-1)
    ref2 = dev2 = diff2 = dot = biggest = 0.0
    nonfinite = 0
    for start in range(0, dev_flat.numel(), CHUNK):
        ref = ref_flat[start:start + CHUNK].to(torch.float64)
        dev = dev_flat[start:start + CHUNK].to(torch.float64)
        nonfinite += int((~torch.isfinite(dev)).sum())
        diff = dev - ref
        ref2, dev2 = ref2 + float(torch.dot(ref, ref)), dev2 + float(torch.dot(dev, dev))
        diff2, dot = diff2 + float(torch.dot(diff, diff)), dot + float(torch.dot(ref, dev))
        biggest = max(biggest, float(diff.abs().max()) if diff.numel() else 0.0)
    ref_norm, numel = math.sqrt(ref2), int(dev_flat.numel())
    if nonfinite:
        return {"local_rel_err": math.inf, "max_abs_err": math.inf, "cosine": math.nan,
                "ref_l2": ref_norm, "nonfinite": nonfinite, "numel": numel}
    return {"local_rel_err": math.sqrt(diff2) / max(ref_norm, 1e-300), "max_abs_err": biggest,
            "cosine": dot / max(ref_norm * math.sqrt(dev2), 1e-300), "ref_l2": ref_norm,
            "nonfinite": 0, "numel": numel}


def _read(path: str, key: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """One tensor of a safetensors file, floats cast to ``dtype``; mapped only while it is read."""
    with safe_open(path, framework="pt") as handle:
        value = handle.get_tensor(key)
    return value.to(dtype) if dtype is not None and value.is_floating_point() else value


def build_module(spec: Mapping[str, Any], dtype: torch.dtype) -> torch.nn.Module:
    """The module of ``spec`` in ``dtype``: built on ``meta``, its tensors read key by key."""
    module = meta_module(spec)
    params = {key: _read(entry["file"], name, dtype)
              for entry in spec["files"] for key, name in entry["keys"].items()}
    with safe_open(spec["exported"], framework="pt") as handle:
        names = list(handle.keys())
    for key in names:
        kind, _, name = key.partition(":")
        tensor = _read(spec["exported"], key, dtype)
        if kind == "param":
            params[name] = tensor
        else:
            owner, _, leaf = name.rpartition(".")
            module.get_submodule(owner)._buffers[leaf] = tensor
    module.load_state_dict(params, strict=True, assign=True)
    still = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if still:
        raise RuntimeError(f"tensors not found in the weights: {still[:5]}")
    return module.to(dtype).eval()


def replay_call(module: torch.nn.Module, call: Mapping[str, Any], path: str,
                dtype: torch.dtype) -> list[dict[str, Any]]:
    """Run one recorded call (tensors in ``path``) in ``dtype``; each output against the device."""
    args = decode(call["args"], lambda name: _read(path, name, dtype))
    kwargs = decode(call["kwargs"], lambda name: _read(path, name, dtype))
    with torch.no_grad(), bounded_if_float64(dtype):
        produced = flatten_tensors(module(*args, **kwargs))
    del args, kwargs  # the inputs go before the device outputs are read: one of the two at a time
    if len(produced) != len(call["outputs"]):
        why = f"the module returned {len(produced)} tensors, the device {len(call['outputs'])}"
        return [{"output": call["key"], "error": why}]
    rows = []
    for index, (ref, name) in enumerate(zip(produced, call["outputs"], strict=True)):
        dev = _read(path, name)  # as stored: local_error casts it chunk by chunk
        label = call["key"] if len(produced) == 1 else f"{call['key']}/{index}"
        if tuple(dev.shape) != tuple(ref.shape):
            why = f"shape differs: replay {list(ref.shape)}, device {list(dev.shape)}"
            rows.append({"output": label, "error": why})
        else:
            rows.append({"output": label, "shape": list(dev.shape), **local_error(ref, dev)})
        del dev
    return rows


def peak_rss_mb(reset: bool = False) -> float | None:
    """Peak resident MB (``VmHWM``; ``None`` without /proc); ``reset`` starts a new peak (Linux)."""
    try:
        if reset:
            Path("/proc/self/clear_refs").write_text("5")
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        return None
    return None


def replay_module(spec: Mapping[str, Any], calls: list[Mapping[str, Any]], calls_dir: str,
                  dtype: torch.dtype) -> dict[str, Any]:
    """Every recorded call of one module: ``{module, seconds, rows, peak_rss_mb}`` or ``error``."""
    gc.collect()
    peak_rss_mb(reset=True)
    start = time.perf_counter()
    try:
        module = build_module(spec, dtype)
    except Exception as exc:  # cannot be rebuilt alone: said per module, the others still run
        return {"module": spec["name"], "error": f"could not be rebuilt: {type(exc).__name__}: "
                                                 f"{str(exc)[:300]}"}
    rows: list[dict[str, Any]] = []
    for call in calls:  # one call's file at a time
        try:
            found = replay_call(module, call, call_file(calls_dir, call), dtype)
            rows += [{"key": call["key"], **row} for row in found]
        except Exception as exc:
            rows.append({"key": call["key"], "output": call["key"],
                         "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        gc.collect()
    del module
    peak = peak_rss_mb()
    gc.collect()
    return {"module": spec["name"], "seconds": time.perf_counter() - start, "rows": rows,
            "peak_rss_mb": peak}


def main() -> int:
    """All modules of the request (stdin), one at a time; results to ``request["results"]``."""
    request = json.loads(sys.stdin.read())
    started = time.perf_counter()
    torch.set_grad_enabled(False)
    dtype = torch.float32 if request.get("precision") == "float32" else torch.float64
    results = {"modules": [], "imports_peak_rss_mb": peak_rss_mb()}  # before the first reset
    for done, spec in enumerate(request["modules"], start=1):
        mine = [c for c in request["manifest"]["calls"] if c["module"] == spec["name"]]
        if mine:
            results["modules"].append(replay_module(spec, mine, request["calls_dir"], dtype))
        progress = {"done": done, "total": len(request["modules"]), "unit": "modules"}
        print(PROGRESS_PREFIX + json.dumps(progress), flush=True)
    results["seconds"] = time.perf_counter() - started
    write_atomic(request["results"], json.dumps(results))
    return 0
