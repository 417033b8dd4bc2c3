"""The reference run itself: the task on CPU in the reference precision, with optional layer hooks."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from ascendbench.compare.hooks import capturing
from ascendbench.precision import dtype_name
from ascendbench.tasks.placement import place

log = logging.getLogger(__name__)


@dataclass
class ReferenceRun:
    """Outputs (CPU, reference precision), the layer capture (or ``None``) and the run's seconds."""

    outputs: dict[str, torch.Tensor]
    capture: Any
    seconds: float


def run_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor], precision: torch.dtype,
                  layers: str | list[str] | None = None, max_capture_bytes: int = 4 << 30) -> ReferenceRun:
    """Cast ``module`` (in place) and the floating-point inputs to ``precision`` and run ``task`` on CPU."""
    name = dtype_name(precision)
    log.info("CPU reference run in %s ...", name)
    start = time.perf_counter()
    module = place(task, module, "cpu", precision)  # task.to() when defined (pipelines, VAE options)
    cast = {k: v.to("cpu", precision) if v.is_floating_point() else v.to("cpu") for k, v in inputs.items()}
    with capturing(module, layers, max_capture_bytes) as capture:
        outputs = {k: v.detach().to("cpu") for k, v in task.run(module, cast).items()}
    seconds = time.perf_counter() - start
    log.info("CPU reference done in %.1f s", seconds)
    return ReferenceRun(outputs, capture, seconds)
