"""The CPU reference run: the same task on the same inputs, on CPU, in raised precision.

``baseline.reference=auto`` uses float64 when the device runs float32 (so a float32 run is never
judged against itself) and float32 when the device runs a half dtype -- msprobe's rule of a
higher-precision golden. The run happens in this process on the already loaded float32 module,
which is cast to the reference dtype and back (float32 -> float64 -> float32 is exact).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

import torch

from ascendbench.errors import ConfigError

log = logging.getLogger(__name__)

REFERENCE_CHOICES = ("auto", "float32", "float64")


def reference_dtype(choice: str, device_dtype: torch.dtype) -> torch.dtype:
    """The reference precision for a device dtype under ``baseline.reference``."""
    if choice not in REFERENCE_CHOICES:
        raise ConfigError(
            f"baseline.reference={choice!r} is not allowed; use one of {', '.join(REFERENCE_CHOICES)} "
            "(auto: float64 for float32 device runs, float32 for half-precision runs)."
        )
    if choice == "auto":
        return torch.float64 if device_dtype == torch.float32 else torch.float32
    return getattr(torch, choice)


def compute_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor],
                      precision: torch.dtype) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Run ``task`` on CPU in ``precision``; the module is returned to float32 afterwards.

    Returns:
        The reference outputs (CPU tensors in ``precision``) and the record's ``baseline`` entry.
    """
    log.info("CPU reference run in %s ...", str(precision).replace("torch.", ""))
    start = time.perf_counter()
    module.to(device="cpu", dtype=precision)
    try:
        cast = {k: v.to(precision) if v.is_floating_point() else v for k, v in inputs.items()}
        outputs = {k: v.detach().to("cpu") for k, v in task.run(module, cast).items()}
    finally:
        module.to(dtype=torch.float32)
    seconds = time.perf_counter() - start
    log.info("CPU reference done in %.1f s", seconds)
    info = {"device": "cpu", "precision": str(precision).replace("torch.", ""), "seconds": seconds,
            "process": "in-process", "cache_key": None, "cache_hit": False}
    return outputs, info
