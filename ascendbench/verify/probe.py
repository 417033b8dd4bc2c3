"""The device probe of ``verify``, in a child process (drivers can hang): one JSON line."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import psutil
import torch

from ascendbench.devices.adapter import cpu_model_name
from ascendbench.devices.runtime import RUNTIMES, load_runtime
from ascendbench.errors import DeviceUnavailableError

_MB = 1024.0 * 1024.0
# diffusers attention backend -> the device types it is meant for.
ATTENTION_BACKENDS: dict[str, tuple[str, ...]] = {
    "native": ("cpu", "cuda", "npu"), "_native_math": ("cpu", "cuda", "npu"),
    "_native_flash": ("cuda",), "_native_efficient": ("cuda",), "_native_npu": ("npu",),
    "flash": ("cuda",)}
# The dtype of the probe call per device type, and its tolerance against float32 math SDPA.
_PROBE_DTYPE = {"cpu": torch.float32, "cuda": torch.float16, "npu": torch.float16}
_PROBE_ATOL = {torch.float32: 1e-5, torch.float16: 1e-2}


def _npu_facts() -> dict[str, Any]:
    try:
        importlib.import_module("torch_npu")
    except Exception as exc:  # ImportError, OSError from missing CANN libraries, RuntimeError...
        return {"importable": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    facts: dict[str, Any] = {"importable": True,
                             "torch_version_cann": getattr(torch.version, "cann", None)}
    try:
        from torch_npu.npu.utils import get_cann_version  # deferred: torch_npu imported above

        facts["cann"] = get_cann_version() or None
    except Exception:  # older torch_npu: no get_cann_version
        facts["cann"] = None
    return facts


def _accelerator(kind: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    facts = _npu_facts() if kind == "npu" else {}
    try:
        runtime = load_runtime(kind)
    except DeviceUnavailableError as exc:
        return {**facts, "count": 0, "why": exc.short}, []
    devices = []
    for index in range(runtime.device_count()):
        free, total = runtime.mem_get_info(index)
        devices.append({"id": f"{kind}:{index}", "name": str(runtime.get_device_name(index)),
                        "total_mb": total / _MB, "free_mb": free / _MB})
    return {**facts, "count": len(devices)}, devices


def _attention_call(backend: str, device: str) -> dict[str, Any]:
    from diffusers.models import attention_dispatch as ad  # deferred: diffusers is heavy

    try:
        name = ad.AttentionBackendName(backend)
        checker = getattr(ad, "_check_attention_backend_requirements", None)
        if checker is not None:
            checker(name)
        dtype = _PROBE_DTYPE[device.split(":")[0]]
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 16, 2, 32, generator=generator) for _ in range(3))  # B, S, H, D
        out = ad.dispatch_attention_fn(*(t.to(device, dtype) for t in (q, k, v)), backend=name)
        want = torch.nn.functional.scaled_dot_product_attention(
            *(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
        diff = float((out.float().cpu() - want).abs().max())
    except Exception as exc:  # missing package, unsupported device or dtype
        return {"ok": False, "why": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    if diff > _PROBE_ATOL[dtype]:
        return {"ok": False, "why": f"output differs from math SDPA by {diff:.3g}"}
    return {"ok": True, "why": f"max diff {diff:.2g} vs math SDPA"}


def probe() -> dict[str, Any]:
    """Everything the parent needs, as plain JSON values."""
    memory = psutil.virtual_memory()
    host = {"id": "cpu", "name": f"{cpu_model_name()} ({torch.get_num_threads()} torch threads)",
            "total_mb": memory.total / _MB, "free_mb": memory.available / _MB}
    report: dict[str, Any] = {"devices": [host], "attention": {}}
    for kind in RUNTIMES:
        report[kind], devices = _accelerator(kind)
        report["devices"] += devices
    for backend, kinds in ATTENTION_BACKENDS.items():
        for device in (d["id"] for d in report["devices"] if d["id"].split(":")[0] in kinds):
            report["attention"].setdefault(backend, {})[device] = _attention_call(backend, device)
    return report


if __name__ == "__main__":
    print(json.dumps(probe()))
    sys.stdout.flush()
