"""The reference run itself: the task on CPU in the reference precision, with optional layer hooks.

A float64 run is evaluated under :func:`ascendbench.baseline.bounded.bounded_float64` (convolutions in
tiles, attention in query chunks), which bounds its memory without changing its math.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping

import torch

from ascendbench.baseline.bounded import Bounds, bounded_float64
from ascendbench.compare.hooks import capturing
from ascendbench.precision import dtype_name
from ascendbench.tasks.inputs import place

log = logging.getLogger(__name__)


@dataclass
class ReferenceRun:
    """Outputs (CPU, reference precision), the layer capture (or ``None``), the run's seconds and what the
    bounded float64 evaluation split (``{}`` in other precisions)."""

    outputs: dict[str, torch.Tensor]
    capture: Any
    seconds: float
    bounded: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def bounded_if_float64(precision: torch.dtype, bounds: Bounds | None = None) -> Iterator[dict[str, Any]]:
    """:func:`bounded_float64` for a float64 reference (the dict it yields is filled with its statistics
    and limits on exit); nothing for other precisions."""
    stats: dict[str, Any] = {}
    bounds = bounds or Bounds()
    if precision != torch.float64:
        yield stats
        return
    with bounded_float64(bounds) as mode:
        yield stats
    stats.update(asdict(mode.stats), conv_limit_mb=bounds.conv_bytes / (1 << 20),
                 attention_limit_mb=bounds.attention_bytes / (1 << 20))


def run_reference(module: torch.nn.Module, task: Any, inputs: Mapping[str, torch.Tensor], precision: torch.dtype,
                  layers: str | list[str] | None = None, max_capture_bytes: int = 4 << 30) -> ReferenceRun:
    """Cast ``module`` (in place) and the floating-point inputs to ``precision`` and run ``task`` on CPU."""
    name = dtype_name(precision)
    log.info("CPU reference run in %s ...", name)
    start = time.perf_counter()
    module = place(task, module, "cpu", precision)  # task.to() when defined (pipelines, VAE options)
    cast = {k: v.to("cpu", precision) if v.is_floating_point() else v.to("cpu") for k, v in inputs.items()}
    with capturing(module, layers, max_capture_bytes) as capture, bounded_if_float64(precision) as bounded:
        outputs = {k: v.detach().to("cpu") for k, v in task.run(module, cast).items()}
    seconds = time.perf_counter() - start
    log.info("CPU reference done in %.1f s%s", seconds,
             f" ({bounded['tiled_convolutions']} of {bounded['convolutions']} convolutions tiled)" if bounded else "")
    return ReferenceRun(outputs, capture, seconds, bounded)
