"""The device run's measurement on a real tiny decoder on the CPU: the record's bench section."""

from __future__ import annotations

import mmap

import pytest
import torch

from ascendbench.bench import measure as measure_module
from ascendbench.bench.measure import Workload, attach_phase_timer, measure
from ascendbench.bench.memory import MemoryDelta, tensor_bytes_mb
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.tasks.base import Task

from helpers import build_tiny_flux2


@pytest.fixture(scope="module")
def decode_call():
    vae = build_tiny_flux2()
    latent = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))

    def call():
        with torch.inference_mode():
            return {"image": vae.decode(latent).sample}

    return call


def bench_cfg(compose_cfg, *overrides):
    return compose_cfg(["device=cpu", "bench.min_iters=3", "bench.max_iters=4",
                        "bench.min_time_s=0", *overrides]).bench


def test_section_has_latency_flops_noise_and_stop(compose_cfg, decode_call):
    peak = compose_cfg(["device=cpu", "device.peak.override.float32=2.0"]).device.peak
    adapter = DeviceAdapter("cpu", peak=peak)
    workload = Workload("float32", items_per_call=1, unit="images")
    result, section = measure(decode_call, adapter, bench_cfg(compose_cfg), workload)
    assert 3 <= section["latency"]["count"] <= 4
    assert section["stop"]["reason"] in ("precision", "max_iters")
    for key in ("median_ms", "p99_ms", "iqr_ms", "cv", "median_ci95_low_ms"):
        assert key in section["latency"]
    assert section["noise"]["threshold"] == 0.10 and section["throughput"]["unit"] == "images/s"
    flops = section["flops"]
    assert flops["per_call"] > 0 and flops["complete"] and flops["by_op"]["aten.convolution"] > 0
    assert flops["peak_tflops"] == 2.0
    assert flops["mfu"] == pytest.approx(flops["achieved_tflops"] / 2.0)
    seconds = section["latency"]["median_ms"] * 1e-3
    assert flops["achieved_tflops"] == pytest.approx(flops["per_call"] / seconds / 1e12)
    assert result.first_outputs["image"].shape == (1, 3, 16, 16)


def test_cpu_without_a_peak_figure_records_why_there_is_no_mfu(compose_cfg, decode_call):
    adapter = DeviceAdapter("cpu", peak=compose_cfg(["device=cpu"]).device.peak)
    _, section = measure(decode_call, adapter, bench_cfg(compose_cfg, "bench.iters=1"),
                         Workload("float32", 1, "images"))
    assert section["flops"]["mfu"] is None
    assert "device.peak.override.float32" in section["flops"]["peak_missing"]


def test_disabled_bench_times_one_call_and_counts_nothing(compose_cfg, decode_call):
    _, section = measure(decode_call, DeviceAdapter("cpu"),
                         bench_cfg(compose_cfg, "bench.enabled=false"),
                         Workload("float32", 1, "images"))
    assert section["latency"]["count"] == 1 and section["flops"]["skipped"] == "bench.enabled=false"


def test_a_failing_flop_count_is_recorded_not_raised(compose_cfg, decode_call, monkeypatch):
    def broken(*_, **__):
        raise RuntimeError("no formula for this shape")

    monkeypatch.setattr(measure_module, "count_flops", broken)
    _, section = measure(decode_call, DeviceAdapter("cpu"), bench_cfg(compose_cfg, "bench.iters=1"),
                         Workload("float32", 1, "images"))
    assert section["flops"]["skipped"].startswith("FlopCounterMode failed: RuntimeError")
    assert section["latency"]["count"] == 1


def test_phase_timer_is_attached_only_to_tasks_that_ask_for_it():
    class PlainTask(Task):
        def make_inputs(self, preset, seed):
            return {}

        def run(self, model, inputs):
            return {}

    class PhasedTask(PlainTask):
        def attach_phase_timer(self, module, timer):
            self.timer, self.module = timer, module
            return True

    assert attach_phase_timer(PlainTask(), object(), DeviceAdapter("cpu")) is None
    task, module = PhasedTask(), object()
    timer = attach_phase_timer(task, module, DeviceAdapter("cpu"))
    assert task.timer is timer and task.module is module and not timer.uses_events


def test_memory_delta_sees_a_host_allocation():
    # A fresh anonymous mapping, every page written: new resident pages whatever the allocator kept
    # from earlier tests in this worker (a torch tensor of the same size can land in memory a freed
    # one left resident, and then the delta is rightly 0: seen once in CI).
    size = 64 * 1024 * 1024
    with MemoryDelta(DeviceAdapter("cpu")) as delta:
        held = mmap.mmap(-1, size)
        for offset in range(0, size, mmap.PAGESIZE):
            held[offset] = 1
    record = delta.to_dict()
    held.close()
    assert record["host_rss_delta_mb"] > 32, record
    assert record["device_allocated_delta_mb"] is None and record["seconds"] >= 0


def test_tensor_bytes_of_a_module():
    expected = (1024 * 256 + 256) * 4 / 2**20
    assert tensor_bytes_mb(torch.nn.Linear(1024, 256)) == pytest.approx(expected)


def test_the_phase_timer_is_taken_off_the_model_after_the_timed_loop(compose_cfg):
    """The timer's wrappers time the loop's calls only: the FLOP count after it, and the later
    stages (the layer capture, the profiler, msprobe's dumps), call the decoder unwrapped."""
    vae = build_tiny_flux2()
    latent = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    timer = attach_phase_timer(_DecodeTask(), vae, DeviceAdapter("cpu"))
    assert "decode" in vars(vae), "the timer wraps the instance's decode"

    def call():
        with torch.inference_mode():
            return {"image": vae.decode(latent).sample}

    result, section = measure(call, DeviceAdapter("cpu"), bench_cfg(compose_cfg),
                              Workload("float32", 1, "images", phase_timer=timer))
    assert result.phases["vae_decode"]["calls"] == section["latency"]["count"]
    assert "decode" not in vars(vae), "the class's own decode again"
    timer.reset()
    call()
    assert timer.result() == {}, "a call after the loop is not timed"


class _DecodeTask(Task):
    """Times ``vae.decode`` as a phase, as the text-to-video tasks do."""

    def make_inputs(self, preset, seed):
        return {}

    def run(self, model, inputs):
        return {}

    def attach_phase_timer(self, module, timer):
        timer.wrap(module, "decode", "vae_decode")
        return True
