"""Shared pieces of the harness benchmarks (not a benchmark itself: `make bench` runs
bench_*.py)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.devices.runtime import probe


def pick_adapter() -> DeviceAdapter:
    """The first usable of npu, cuda, cpu (as device=auto does)."""
    for name in ("npu", "cuda", "cpu"):
        if probe(name)[0]:
            # One CPU thread: on a busy host, multi-threaded small ops stall at OpenMP barriers and
            # the comparison would measure the scheduler instead of the harness.
            return DeviceAdapter(name, threads=1 if name == "cpu" else None)
    raise RuntimeError("no device")


def matmul_op(adapter: DeviceAdapter, target_ms: float) -> tuple[Callable[[], torch.Tensor], int]:
    """A square matmul on the device sized so one call takes about ``target_ms`` (calibrated
    here)."""
    n = 32
    while True:
        a = torch.randn(n, n, device=adapter.torch_device)
        op = lambda a=a: torch.mm(a, a)  # noqa: E731
        for _ in range(
            100
        ):  # the first calls of a fresh process can be 1000x slower (thread pool start)
            op()
        adapter.synchronize()
        if synced_perf_counter_median_ms(op, adapter, 31) >= target_ms or n >= 16384:
            return op, n
        n = int(n * 1.25) // 8 * 8 + 8


def synced_perf_counter_median_ms(
    op: Callable[[], object], adapter: DeviceAdapter, iters: int, untimed: int = 0
) -> float:
    """The plain reference loop: synchronize, perf_counter, call, synchronize, perf_counter; after
    ``untimed`` calls (to match the untimed calls of the method it is compared with)."""
    for _ in range(untimed):
        op()
    samples = []
    for _ in range(iters):
        adapter.synchronize()
        t0 = time.perf_counter()
        op()
        adapter.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def describe(adapter: DeviceAdapter) -> str:
    return (
        f"{adapter.name} ({adapter.device_name()}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} CPU threads"
    )
