"""Fakes for the timing loops: a clock that moves only when a fake call moves it, a host-only
adapter, and a run of the bench loop on a fake host.

The adapter has the surface :class:`ascendbench.bench.loop.BenchLoop` and
:class:`ascendbench.bench.interleave.InterleavedLoop` use of
:class:`ascendbench.devices.adapter.DeviceAdapter` (synchronize, new_event, reset_peak_memory,
peak_memory_mb), as the CPU adapter has it: no events.
"""

from __future__ import annotations

from typing import Iterable

from ascendbench.bench.loop import BenchLoop
from ascendbench.report.significance import Latency, section_latency


class FakeClock:
    """A clock that only moves when a fake call runs (``clock.now += seconds``)."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class HostOnlyAdapter:
    """A CPU-like adapter: no events, synchronize is a no-op; ``log`` keeps what the loop asked of
    it."""

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


def fake_run(durations_s: Iterable[float], budget, history=None, clock: FakeClock | None = None):
    """The bench loop on a call whose n-th invocation takes ``durations_s[n]`` seconds of fake time.
    """
    clock = clock or FakeClock()
    durations = iter(durations_s)

    def call():
        clock.now += next(durations)

    return BenchLoop(HostOnlyAdapter(), budget, clock=clock, history=history).run(call)


def latency_from_section(bench: dict) -> Latency:
    """The gate's :class:`Latency` of a ``bench`` section in memory (a side of a record's ``ab``),
    as :func:`~ascendbench.report.significance.latency_of` reads it from a record file."""
    return section_latency(bench, float(bench["latency"]["median_ms"]))
