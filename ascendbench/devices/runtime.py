"""Device runtimes as lookup tables keyed by device type.

Accelerators expose the same API under ``torch.<type>`` (``torch.cuda``, and ``torch.npu`` once
``torch_npu`` is imported): synchronize, events, peak memory, device name. The tables below map a
device type to how its runtime module is obtained and what to tell a user when it is missing; the
CPU has no runtime module and uses host figures instead. Nothing here branches on device names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ascendbench.errors import DeviceUnavailableError


def _cuda_runtime() -> Any:
    return torch.cuda


def _npu_runtime() -> Any:
    importlib.import_module("torch_npu")  # registers torch.npu; heavy, so imported only here
    return torch.npu


@dataclass(frozen=True)
class RuntimeSpec:
    """How to reach one accelerator type's runtime and how to explain its absence."""

    load: Callable[[], Any]
    missing_hint: str
    no_device_hint: str


RUNTIMES: dict[str, RuntimeSpec] = {
    "cuda": RuntimeSpec(
        load=_cuda_runtime,
        missing_hint="this torch build has no CUDA support; install a CUDA build of torch "
        "(https://pytorch.org/get-started/locally/)",
        no_device_hint="no CUDA device is visible (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)",
    ),
    "npu": RuntimeSpec(
        load=_npu_runtime,
        missing_hint="the torch_npu package cannot be imported; on an Ascend host install CANN, then "
        "`pip install 'ascendbench[npu]'` (torch_npu matching your torch version) and "
        "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`",
        no_device_hint="torch_npu is installed but no NPU is visible (check `npu-smi info` and "
        "ASCEND_RT_VISIBLE_DEVICES)",
    ),
}

ALLOWED_DEVICES = ("cpu", "cuda", "npu", "auto")


def load_runtime(device_type: str) -> Any:
    """Return the ``torch.<type>`` runtime module of an accelerator, checked for a visible device.

    Raises:
        DeviceUnavailableError: the runtime package cannot be imported or shows no device.
    """
    spec = RUNTIMES[device_type]
    try:
        runtime = spec.load()
    except (ImportError, OSError, RuntimeError) as exc:
        error = DeviceUnavailableError(_unavailable(device_type, f"{spec.missing_hint} ({exc})"))
        error.short = f"runtime not importable ({type(exc).__name__}: {str(exc)[:80]})"
        raise error from exc
    if not runtime.is_available() or runtime.device_count() == 0:
        error = DeviceUnavailableError(_unavailable(device_type, spec.no_device_hint))
        error.short = "runtime present but no device visible"
        raise error
    return runtime


def probe(device_type: str) -> tuple[bool, str]:
    """Whether ``device_type`` is usable here, with a short reason (for ``device=auto`` and checks)."""
    if device_type == "cpu":
        return True, "the host CPU is always available"
    try:
        load_runtime(device_type)
    except DeviceUnavailableError as exc:
        return False, exc.short
    return True, f"{device_type} runtime loaded and a device is visible"


def _unavailable(device_type: str, why: str) -> str:
    others = ", ".join(d for d in ALLOWED_DEVICES if d != device_type)
    return (
        f"device={device_type} is not available on this host: {why}. "
        f"Choose another device on the command line (allowed: {others}), e.g. `device=cpu` or "
        f"`device=auto`, which picks npu, then cuda, then cpu."
    )
