"""The events path through the adapter seam: fake NPU runtime and fake events, synchronize
ordering."""

from __future__ import annotations

import types

import pytest
import torch

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchLoop, run_bench
from ascendbench.bench.phases import PhaseTimer
from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter


class Clocks:
    """A host clock and a device timeline, both moved only by the fake work."""

    def __init__(self):
        self.host = 0.0
        self.device_ms = 0.0

    def __call__(self):
        return self.host


class FakeEvent:
    def __init__(self, rt, ident):
        self.rt, self.ident, self.at_ms = rt, ident, None

    def record(self):
        self.at_ms = self.rt.clocks.device_ms
        self.rt.log.append(f"record:{self.ident}")

    def elapsed_time(self, end):
        before = [e for e in self.rt.log if e != "elapsed"]
        assert before[-1] == "sync", "events are read only after a synchronize"
        self.rt.log.append("elapsed")
        return end.at_ms - self.at_ms


class FakeNpuRuntime:
    """Stands in for torch.npu: synchronize, Event, memory stats, compile mode, HF32 switches."""

    def __init__(self, clocks):
        self.clocks, self.log, self.events = clocks, [], 0
        self.matmul = types.SimpleNamespace(allow_hf32=True)
        self.conv = types.SimpleNamespace(allow_hf32=True)
        self.jit = True
        self.allocated = 0

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def synchronize(self, index):
        self.log.append("sync")

    def Event(self, enable_timing):  # noqa: N802 - mirrors torch.npu.Event
        assert enable_timing is True
        self.events += 1
        return FakeEvent(self, self.events)

    def reset_peak_memory_stats(self, index):
        self.log.append("reset_peak")

    def max_memory_allocated(self, index):
        return 64 * 1024 * 1024

    def max_memory_reserved(self, index):
        return 96 * 1024 * 1024

    def memory_allocated(self, index):
        return self.allocated

    def get_device_name(self, index):
        return "Ascend910B4"

    def set_device(self, index):  # torch.npu.set_device: the adapter selects its card first
        self.card = index

    def set_option(self, option):  # torch.npu.set_option (ACL_PRECISION_MODE on pre-910B chips)
        self.options = {**getattr(self, "options", {}), **option}

    def set_compile_mode(self, jit_compile):
        self.jit = jit_compile

    def is_jit_compile_false(self):
        return not self.jit


@pytest.fixture
def fake_npu(monkeypatch):
    clocks = Clocks()
    fake = FakeNpuRuntime(clocks)
    monkeypatch.setitem(runtime.RUNTIMES, "npu",
                        runtime.RuntimeSpec(lambda: fake, "missing", "no device"))
    return fake


def work(fake, host_s, device_ms):
    """A call that queues device work: the device timeline and the host clock both move."""

    def call():
        fake.log.append("call")
        fake.clocks.device_ms += device_ms
        fake.clocks.host += host_s
        return {"out": torch.zeros(1)}

    return call


def test_each_timed_call_is_bracketed_by_synchronize_and_events(fake_npu):
    adapter = DeviceAdapter("npu")
    budget = BenchBudget(warmup=1, min_iters=2, max_iters=2, stability=None)
    result = BenchLoop(adapter, budget, clock=fake_npu.clocks).run(work(fake_npu, 0.004, 3.0))

    iteration = ["sync", "record:1", "call", "record:2", "sync", "elapsed"]
    # each warm-up call is host-timed (bench.warmup.calls_ms), no events
    warmup = ["sync", "call", "sync"]
    expected = iteration + warmup + ["sync", "reset_peak"] + iteration * 2
    assert fake_npu.log == expected
    assert fake_npu.events == 2, "one start/end pair, reused for every call"
    assert result.samples_ms == pytest.approx([4.0, 4.0]) and result.cold_ms == pytest.approx(4.0)
    assert result.event_samples_ms == [3.0, 3.0] and result.cold_event_ms == 3.0
    assert result.event_latency.median_ms == 3.0
    assert result.memory["peak_allocated_mb"] == 64.0 and result.memory["peak_reserved_mb"] == 96.0
    assert result.memory["peak_rss_mb"] > 0, "host peak RSS is recorded on accelerators too"
    section = result.to_dict(items_per_call=2, unit="images")
    assert section["event_latency"]["count"] == 2 and "npu events" in section["event_timer"]
    assert section["throughput"]["value"] == pytest.approx(2 / 0.004)


def test_events_can_be_switched_off(fake_npu):
    adapter = DeviceAdapter("npu")
    budget = BenchBudget(warmup=0, min_iters=1, max_iters=1, stability=None)
    result = BenchLoop(adapter, budget, use_events=False,
                       clock=fake_npu.clocks).run(work(fake_npu, 0.001, 1.0))
    assert fake_npu.events == 0 and result.event_latency is None and result.event_samples_ms is None
    assert fake_npu.log == ["sync", "call", "sync", "sync", "reset_peak", "sync", "call", "sync"]


def test_cpu_has_no_events_and_times_with_the_host_clock_only():
    adapter = DeviceAdapter("cpu")
    result = run_bench(lambda: {"x": torch.ones(1)}, adapter,
                       BenchBudget(warmup=0, min_iters=2, max_iters=2,
                                                                          stability=None))
    assert (result.event_latency is None and result.cold_event_ms is None
            and result.latency.count == 2)
    assert result.memory["peak_rss_mb"] == result.memory["peak_allocated_mb"]
    assert "host process peak RSS" in result.memory["scope"]


def test_phase_timer_on_device_events_adds_no_synchronize_inside_the_call(fake_npu):
    adapter = DeviceAdapter("npu")
    timer = PhaseTimer.for_adapter(adapter)
    assert timer.uses_events

    def call():
        with timer.phase("encode"):
            fake_npu.clocks.device_ms += 2.0
        with timer.phase("decode"):
            fake_npu.clocks.device_ms += 5.0
        return {}

    fake_npu.log.clear()
    budget = BenchBudget(warmup=0, min_iters=3, max_iters=3, stability=None)
    loop = BenchLoop(adapter, budget, use_events=False, clock=fake_npu.clocks)
    result = loop.run(call, phase_timer=timer)
    timed = fake_npu.log[fake_npu.log.index("reset_peak") + 1:]
    opening = timed.index("sync")
    inside_first_call = timed[opening + 1:timed.index("sync", opening + 1)]
    assert len(inside_first_call) == 4, "begin/end stamps of two phases"
    assert all(e.startswith("record:") for e in inside_first_call), "no synchronize inside a call"
    assert (result.phases["encode"]["median_ms"] == 2.0
            and result.phases["decode"]["median_ms"] == 5.0)
    assert result.phases["decode"]["calls"] == 3 and result.phases["decode"]["cold_total_ms"] == 5.0


def test_device_settings_are_applied_and_recorded(fake_npu, monkeypatch):
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    monkeypatch.delenv("TASK_QUEUE_ENABLE", raising=False)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        adapter = DeviceAdapter("npu", jit_compile=False, deterministic=True,
                                record_env=["ASCEND_RT_VISIBLE_DEVICES", "TASK_QUEUE_ENABLE"])
        assert torch.are_deterministic_algorithms_enabled()
        info = adapter.info()
    finally:
        torch.use_deterministic_algorithms(before)
    assert fake_npu.jit is False and info["jit_compile"] is False
    assert (info["deterministic"] is True
            and info["deterministic_switches"]["torch.use_deterministic_algorithms"])
    assert info["env_observed"] == {"ASCEND_RT_VISIBLE_DEVICES": "3", "TASK_QUEUE_ENABLE": None}
    assert info["precision_switches"] == {"npu.matmul.allow_hf32": False,
                                          "npu.conv.allow_hf32": False}
    assert info["cpu_threads"] == torch.get_num_threads()


def test_compile_mode_left_alone_is_still_reported(fake_npu):
    assert DeviceAdapter("npu").info()["jit_compile"] is True and fake_npu.jit is True


def test_cpu_thread_count_setting(monkeypatch):
    before = torch.get_num_threads()
    try:
        assert DeviceAdapter("cpu", threads=1).info()["cpu_threads"] == 1
    finally:
        torch.set_num_threads(before)


def test_memory_allocated_follows_the_runtime(fake_npu):
    adapter = DeviceAdapter("npu")
    fake_npu.allocated = 3 * 1024 * 1024
    assert adapter.memory_allocated_mb() == 3.0
    assert DeviceAdapter("cpu").memory_allocated_mb() is None
