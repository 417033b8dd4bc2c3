"""Fakes for the timing loops: a clock that moves only when a fake call moves it, and a host-only adapter.

The adapter has the surface :class:`ascendbench.bench.loop.BenchLoop` and
:class:`ascendbench.bench.interleave.InterleavedLoop` use of
:class:`ascendbench.devices.adapter.DeviceAdapter` (synchronize, new_event, reset_peak_memory,
peak_memory_mb), as the CPU adapter has it: no events.
"""

from __future__ import annotations


class FakeClock:
    """A clock that only moves when a fake call runs (``clock.now += seconds``)."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class HostOnlyAdapter:
    """A CPU-like adapter: no events, synchronize is a no-op; ``log`` keeps what the loop asked of it."""

    name = "fake"

    def __init__(self):
        self.log: list[str] = []

    def synchronize(self):
        self.log.append("sync")

    def new_event(self):
        return None

    def reset_peak_memory(self):
        self.log.append("reset_peak")

    def peak_memory_mb(self):
        return {"peak_rss_mb": 1.0, "scope": "fake"}
