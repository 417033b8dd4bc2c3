"""Keep ``torch_npu`` out of the reference process.

diffusers replaces RMSNorm, GEGLU and other layers with torch_npu kernels whenever ``torch_npu`` is
importable, whatever device the tensors are on -- so a "CPU" reference computed on an Ascend host would
silently run NPU code paths. The reference child process calls :func:`block_torch_npu` before torch or
diffusers is imported: ``sys.modules["torch_npu"] = None`` makes ``import torch_npu`` raise
``ModuleNotFoundError`` and ``importlib.util.find_spec("torch_npu")`` return ``None`` (the check diffusers
and transformers use), and ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` stops torch from loading device backend
entry points. This module imports nothing heavy on purpose.
"""

from __future__ import annotations

import importlib.util
import os
import sys

BLOCKED = ("torch_npu",)


def block_torch_npu() -> None:
    """Make ``torch_npu`` unimportable in this process (must run before torch is imported).

    Raises:
        RuntimeError: torch_npu (or torch) was imported already, so the process is not clean.
    """
    loaded = [name for name in BLOCKED + ("torch",) if sys.modules.get(name) is not None]
    if loaded:
        raise RuntimeError(f"the reference process is not clean: {', '.join(loaded)} already imported")
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    for name in BLOCKED:
        sys.modules[name] = None  # type: ignore[assignment]


def torch_npu_blocked() -> bool:
    """True when ``torch_npu`` can be neither found nor imported in this process."""
    return all(importlib.util.find_spec(name) is None and name in sys.modules and sys.modules[name] is None
               for name in BLOCKED)
