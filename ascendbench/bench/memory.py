"""Memory figures around a stage of the job: time, host RSS delta and device allocation delta.

Use it around model loading or placement::

    with MemoryDelta(adapter) as load:
        loaded = loader.load(...)
    record["weights"]["load"] = load.to_dict()

Host figures are the process's resident set (``VmRSS``); device figures come from the device's
caching allocator (``memory_allocated``) and are ``None`` on the CPU, which has none.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from ascendbench.devices.adapter import host_rss_mb


class MemoryDelta:
    """Context manager measuring a block: seconds, host RSS delta, device allocated delta (MiB).

    Args:
        adapter: the device adapter (synchronized before and after the block).
        clock: host clock in seconds.
    """

    def __init__(self, adapter: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.adapter = adapter
        self.clock = clock
        self.seconds: float | None = None
        self.host_rss_delta_mb: float | None = None
        self.host_rss_mb: float | None = None
        self.device_allocated_delta_mb: float | None = None
        self.device_allocated_mb: float | None = None

    def __enter__(self) -> "MemoryDelta":
        self.adapter.synchronize()
        self._rss0 = host_rss_mb()
        self._dev0 = self.adapter.memory_allocated_mb()
        self._t0 = self.clock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.adapter.synchronize()
        self.seconds = self.clock() - self._t0
        self.host_rss_mb = host_rss_mb()
        self.host_rss_delta_mb = self.host_rss_mb - self._rss0
        dev1 = self.adapter.memory_allocated_mb()
        self.device_allocated_mb = dev1
        self.device_allocated_delta_mb = None if dev1 is None or self._dev0 is None else dev1 - self._dev0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the record (``seconds``, ``*_mb`` in MiB)."""
        return {
            "seconds": self.seconds,
            "host_rss_delta_mb": self.host_rss_delta_mb,
            "host_rss_mb": self.host_rss_mb,
            "device_allocated_delta_mb": self.device_allocated_delta_mb,
            "device_allocated_mb": self.device_allocated_mb,
        }


def tensor_bytes_mb(module: Any) -> float:
    """Size of a module's parameters and buffers in MiB (what placing it on a device must hold).

    A pipeline (no ``parameters()``) counts the ``torch.nn.Module`` components it holds.
    """
    if not isinstance(module, torch.nn.Module):
        return sum(tensor_bytes_mb(c) for c in getattr(module, "components", {}).values()
                   if isinstance(c, torch.nn.Module))
    total = sum(t.numel() * t.element_size() for t in list(module.parameters()) + list(module.buffers()))
    return total / (1024.0 * 1024.0)
