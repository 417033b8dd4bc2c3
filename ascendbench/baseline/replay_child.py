"""The replay reference process's work (started as ``python -m ascendbench.baseline.replay_process``, which
ties its life to the job and blocks torch_npu before this module imports torch).

It reads the job's request (JSON, over a pipe) and, one module at a time, rebuilds the module from its weights
(:mod:`ascendbench.baseline.replay_modules`), runs it in float64 (bounded: convolutions in tiles) on each
recorded device input and compares the result with the recorded device output: the module's **local error**,
the error it adds given the device's own inputs. Only one module and one call's tensors are in memory at once.
The results go to the JSON file the request names, written atomically.
"""

from __future__ import annotations

import gc
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import torch

from ascendbench.baseline.child import PROGRESS_PREFIX
from ascendbench.baseline.compute import bounded_if_float64
from ascendbench.baseline.replay_modules import check_class_path
from ascendbench.compare.capture import decode
from ascendbench.compare.hooks import flatten_tensors
from ascendbench.fileio import atomic_path
from ascendbench.models.base import import_class

CHUNK = 1 << 22  # elements compared at a time: no full-size float64 copy or difference of an output


def local_error(reference: torch.Tensor, device: torch.Tensor) -> dict[str, Any]:
    """Local error of one output: ``||dev - ref||_2 / ||ref||_2`` (``local_rel_err``), max abs error, cosine.

    Both sides in float64, :data:`CHUNK` elements at a time; a device output with NaN/Inf has an infinite local
    error.

    >>> local_error(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.5]))["local_rel_err"]
    0.1
    """
    ref_flat, dev_flat = reference.detach().reshape(-1), device.detach().reshape(-1)
    sums = {"ref": 0.0, "dev": 0.0, "diff": 0.0, "dot": 0.0, "max": 0.0, "nonfinite": 0}
    for start in range(0, dev_flat.numel(), CHUNK):
        ref = ref_flat[start:start + CHUNK].to(torch.float64)
        dev = dev_flat[start:start + CHUNK].to(torch.float64)
        sums["nonfinite"] += int((~torch.isfinite(dev)).sum())
        diff = dev - ref
        sums["ref"] += float(torch.dot(ref, ref))
        sums["dev"] += float(torch.dot(dev, dev))
        sums["diff"] += float(torch.dot(diff, diff))
        sums["dot"] += float(torch.dot(ref, dev))
        sums["max"] = max(sums["max"], float(diff.abs().max()) if diff.numel() else 0.0)
    ref_norm = math.sqrt(sums["ref"])
    if sums["nonfinite"]:
        return {"local_rel_err": math.inf, "max_abs_err": math.inf, "cosine": math.nan, "ref_l2": ref_norm,
                "nonfinite": sums["nonfinite"], "numel": int(dev_flat.numel())}
    rel = math.sqrt(sums["diff"]) / max(ref_norm, 1e-300)
    cosine = sums["dot"] / max(ref_norm * math.sqrt(sums["dev"]), 1e-300)
    return {"local_rel_err": rel, "max_abs_err": sums["max"], "cosine": cosine, "ref_l2": ref_norm, "nonfinite": 0,
            "numel": int(dev_flat.numel())}


def _assign(module: torch.nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
    module.load_state_dict(dict(tensors), strict=True, assign=True)


def _set_buffers(module: torch.nn.Module, buffers: Mapping[str, torch.Tensor]) -> None:
    for name, tensor in buffers.items():
        owner, _, leaf = name.rpartition(".")
        module.get_submodule(owner)._buffers[leaf] = tensor


def meta_module(spec: Mapping[str, Any]) -> torch.nn.Module:
    """The module of ``spec`` on the ``meta`` device: its component built from class and config, taken out."""
    check_class_path(spec["class_path"])
    cls = import_class(spec["class_path"])
    with torch.device("meta"):
        component = cls.from_config(spec["config"]) if hasattr(cls, "from_config") else cls(**spec["config"])
    return component.get_submodule(spec["path"]) if spec["path"] else component


def read_tensor(path: str, key: str, dtype: torch.dtype) -> torch.Tensor:
    """One tensor of a safetensors file, floating-point ones cast to ``dtype``; the file is mapped only while it is
    read (a mapping left open keeps every page read so far resident: the whole file beside its cast copy)."""
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        value = handle.get_tensor(key)
    return value.to(dtype) if value.is_floating_point() else value


def build_module(spec: Mapping[str, Any], dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """The module of ``spec`` in ``dtype`` (float64 unless the request says float32): its component on ``meta``,
    its tensors read key by key, each cast as it is read (never the file's and the cast copy of every tensor at
    once: the plan counts the parameters once, in ``dtype``)."""
    from safetensors import safe_open

    module = meta_module(spec)
    params: dict[str, torch.Tensor] = {}
    for entry in spec["files"]:
        params.update({key: read_tensor(entry["file"], file_key, dtype) for key, file_key in entry["keys"].items()})
    buffers: dict[str, torch.Tensor] = {}
    with safe_open(spec["exported"], framework="pt") as handle:
        names = list(handle.keys())
    for key in names:
        kind, _, name = key.partition(":")
        (params if kind == "param" else buffers)[name] = read_tensor(spec["exported"], key, dtype)
    _assign(module, params)
    _set_buffers(module, buffers)
    still = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if still:
        raise RuntimeError(f"tensors not found in the weights: {still[:5]}")
    return module.to(dtype).eval()


def replay_call(module: torch.nn.Module, call: Mapping[str, Any], path: str,
                dtype: torch.dtype = torch.float64) -> list[dict[str, Any]]:
    """Run one recorded call (its tensors in the file ``path``) in ``dtype`` and compare each output with the
    device's."""
    def tensor(name: str) -> torch.Tensor:
        return read_tensor(path, name, dtype)

    args, kwargs = decode(call["args"], tensor), decode(call["kwargs"], tensor)
    with torch.no_grad(), bounded_if_float64(dtype):
        produced = flatten_tensors(module(*args, **kwargs))
    del args, kwargs  # the inputs go before the device outputs are read: one of the two at a time
    if len(produced) != len(call["outputs"]):
        return [{"output": call["key"], "error": f"the module returned {len(produced)} tensors, the device "
                                                 f"{len(call['outputs'])}"}]
    rows = []
    for index, (ref, name) in enumerate(zip(produced, call["outputs"], strict=True)):
        dev = _device_output(path, name)
        label = call["key"] if len(produced) == 1 else f"{call['key']}/{index}"
        if tuple(dev.shape) != tuple(ref.shape):
            rows.append({"output": label, "error": f"shape differs: replay {list(ref.shape)}, device "
                                                   f"{list(dev.shape)}"})
        else:
            rows.append({"output": label, "shape": list(dev.shape), **local_error(ref, dev)})
        del dev
    return rows


def _device_output(path: str, name: str) -> torch.Tensor:
    """A recorded device output as stored (its own dtype: the comparison casts it chunk by chunk)."""
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        return handle.get_tensor(name)


def call_file(calls_dir: str, call: Mapping[str, Any]) -> str:
    """The file of one recorded call, inside ``calls_dir`` (a name from the manifest is data: a plain file name)."""
    name = str(call.get("file") or "")
    if not name.endswith(".safetensors") or Path(name).name != name or name.startswith("."):
        raise ValueError(f"recorded call {call.get('key')!r} names file {name!r}, not a file of {calls_dir}")
    return str(Path(calls_dir) / name)


def peak_rss_mb(reset: bool = False) -> float | None:
    """This process's peak resident memory since the last reset (``VmHWM``; ``None`` where /proc has none);
    ``reset``: start a new peak from the current RSS (``clear_refs`` 5, Linux >= 4.0)."""
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
                  dtype: torch.dtype = torch.float64) -> dict[str, Any]:
    """Every recorded call of one module: ``{module, seconds, rows, peak_rss_mb}`` or ``{module, error}``."""

    gc.collect()
    peak_rss_mb(reset=True)
    start = time.perf_counter()
    try:
        module = build_module(spec, dtype)
    except Exception as exc:  # the module cannot be rebuilt alone: said per module, the others still run
        return {"module": spec["name"], "error": f"could not be rebuilt: {type(exc).__name__}: {str(exc)[:300]}"}
    rows: list[dict[str, Any]] = []
    for call in calls:  # one call's file at a time
        try:
            rows += [{"key": call["key"], **row} for row in replay_call(module, call, call_file(calls_dir, call),
                                                                        dtype)]
        except Exception as exc:
            rows.append({"key": call["key"], "output": call["key"],
                         "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        gc.collect()
    del module
    peak = peak_rss_mb()
    gc.collect()
    return {"module": spec["name"], "seconds": time.perf_counter() - start, "rows": rows, "peak_rss_mb": peak}


def run_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """All modules of the request, one at a time, in the order given."""
    torch.set_grad_enabled(False)
    results = []
    calls = request["manifest"]["calls"]
    dtype = torch.float32 if request.get("precision") == "float32" else torch.float64
    imports = peak_rss_mb()  # the peak of the imports, before the first module's reset
    for done, spec in enumerate(request["modules"], start=1):
        mine = [c for c in calls if c["module"] == spec["name"]]
        if mine:
            results.append(replay_module(spec, mine, request["calls_dir"], dtype))
        print(PROGRESS_PREFIX + json.dumps({"done": done, "total": len(request["modules"]), "unit": "modules"}),
              flush=True)
    return {"modules": results, "imports_peak_rss_mb": imports}


def main() -> int:
    """The request from standard input; results to ``request["results"]``."""
    request = json.loads(sys.stdin.read())
    started = time.perf_counter()
    results = run_request(request)
    results["seconds"] = time.perf_counter() - started
    with atomic_path(request["results"]) as tmp:
        tmp.write_text(json.dumps(results))
    return 0
