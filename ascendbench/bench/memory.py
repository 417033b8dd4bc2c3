"""Time, host RSS and device allocation around a stage of the job (model load, placement)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from ascendbench.devices.adapter import host_rss_mb


class MemoryDelta:
    """Seconds and host RSS / device allocated deltas (MiB) of a block, synchronized around it."""

    def __init__(self, adapter: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.adapter, self.clock = adapter, clock
        self.seconds: float | None = None
        self.host_rss_delta_mb: float | None = None
        self.host_rss_mb: float | None = None
        self.device_allocated_delta_mb: float | None = None
        self.device_allocated_mb: float | None = None

    def __enter__(self) -> MemoryDelta:
        self.adapter.synchronize()
        self._rss0, self._dev0 = host_rss_mb(), self.adapter.memory_allocated_mb()
        self._t0 = self.clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.adapter.synchronize()
        self.seconds = self.clock() - self._t0
        self.host_rss_mb = host_rss_mb()
        self.host_rss_delta_mb = self.host_rss_mb - self._rss0
        self.device_allocated_mb = self.adapter.memory_allocated_mb()
        if self.device_allocated_mb is not None and self._dev0 is not None:
            self.device_allocated_delta_mb = self.device_allocated_mb - self._dev0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record."""
        keys = ("seconds", "host_rss_delta_mb", "host_rss_mb", "device_allocated_delta_mb",
                "device_allocated_mb")
        return {key: getattr(self, key) for key in keys}


def tensor_bytes_mb(module: Any) -> float:
    """Parameters and buffers in MiB (of a pipeline: its ``torch.nn.Module`` components)."""
    if not isinstance(module, torch.nn.Module):
        return sum(tensor_bytes_mb(c) for c in getattr(module, "components", {}).values()
                   if isinstance(c, torch.nn.Module))
    tensors = list(module.parameters()) + list(module.buffers())
    return sum(t.numel() * t.element_size() for t in tensors) / (1024.0 * 1024.0)
