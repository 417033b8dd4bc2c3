"""Device runtimes by type: how ``torch.<type>`` is loaded, what to say when it is missing."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ascendbench.errors import DeviceUnavailableError
from ascendbench.npu_wheels import host_hint

ALLOWED_DEVICES = ("cpu", "cuda", "npu", "auto")


def _npu_runtime() -> Any:
    importlib.import_module("torch_npu")  # registers torch.npu; heavy, so imported only here
    return torch.npu


@dataclass(frozen=True)
class RuntimeSpec:
    """How to reach one accelerator type's runtime and how to explain its absence."""

    load: Callable[[], Any]
    missing_hint: str | Callable[[], str]  # a callable: made when needed (it may look at the host)
    no_device_hint: str


RUNTIMES: dict[str, RuntimeSpec] = {
    "cuda": RuntimeSpec(lambda: torch.cuda, "this torch build has no CUDA support; install a CUDA "
                        "build of torch (https://pytorch.org/get-started/locally/)",
                        "no CUDA device is visible (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)"),
    "npu": RuntimeSpec(_npu_runtime,
                       lambda: f"the torch_npu package cannot be imported; {host_hint()}",
                       "torch_npu is installed but no NPU is visible (check `npu-smi info` and "
                       "ASCEND_RT_VISIBLE_DEVICES)"),
}


def _unavailable(device_type: str, why: str, short: str) -> DeviceUnavailableError:
    others = ", ".join(d for d in ALLOWED_DEVICES if d != device_type)
    error = DeviceUnavailableError(
        f"device={device_type} is not available on this host: {why}. Choose another device on the "
        f"command line (allowed: {others}), e.g. `device=cpu` or `device=auto`, which picks npu, "
        "then cuda, then cpu.")
    error.short = short
    return error


def load_runtime(device_type: str) -> Any:
    """``torch.<type>`` of an accelerator with a visible device, else DeviceUnavailableError."""
    spec = RUNTIMES[device_type]
    try:
        runtime = spec.load()
    except (ImportError, OSError, RuntimeError) as exc:
        short = f"runtime not importable ({type(exc).__name__}: {str(exc)[:80]})"
        hint = spec.missing_hint() if callable(spec.missing_hint) else spec.missing_hint
        raise _unavailable(device_type, f"{hint} ({exc})", short) from exc
    if not runtime.is_available() or runtime.device_count() == 0:
        short = "runtime present but no device visible"
        raise _unavailable(device_type, spec.no_device_hint, short)
    return runtime


def probe(device_type: str) -> tuple[bool, str]:
    """Whether ``device_type`` is usable here, with a short reason (``device=auto``, checks)."""
    if device_type == "cpu":
        return True, "the host CPU is always available"
    try:
        load_runtime(device_type)
    except DeviceUnavailableError as exc:
        return False, exc.short
    return True, f"{device_type} runtime loaded and a device is visible"
