"""Device adapters: CPU, the npu error without torch_npu, auto choice, and the runtime table
seam."""

from __future__ import annotations

import types

import pytest
import torch

from ascendbench import npu_wheels
from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter, auto_select
from ascendbench.errors import ConfigError, DeviceUnavailableError


def test_cpu_adapter_reports_host_memory_and_no_events():
    adapter = DeviceAdapter("cpu")
    adapter.synchronize()
    adapter.reset_peak_memory()
    memory = adapter.peak_memory_mb()
    assert memory["peak_rss_mb"] > 0 and "host" in memory["scope"]
    assert adapter.new_event() is None
    assert adapter.torch_device == torch.device("cpu")
    assert adapter.info()["type"] == "cpu" and adapter.info()["name"]


def test_npu_without_torch_npu_is_one_actionable_paragraph(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch_npu", None)  # import fails as when absent
    with pytest.raises(DeviceUnavailableError) as err:
        DeviceAdapter("npu")
    message = str(err.value)
    assert "device=npu is not available" in message
    assert "torch_npu" in message and "ascendbench[npu]" not in message  # never an unpinned extra
    assert "device=cpu" in message and "\n" not in message


def test_the_npu_hint_names_the_wheel_for_this_torch_and_cann(monkeypatch):
    """The hint pins torch_npu with --no-deps (never an install that replaces the host's torch)."""
    monkeypatch.setitem(__import__("sys").modules, "torch_npu", None)
    real = npu_wheels.md.version
    monkeypatch.setattr(npu_wheels.md, "version",
                        lambda name: "2.9.0+cpu" if name == "torch" else real(name))
    monkeypatch.setattr(npu_wheels, "host_cann", lambda: ("8.5.0", "/x/version.info"))
    with pytest.raises(DeviceUnavailableError) as err:
        DeviceAdapter("npu")
    wheel = "`pip install --no-deps torch_npu==2.9.0` (the wheel for torch 2.9.0 and CANN 8.5.0)"
    assert wheel in str(err.value)
    monkeypatch.setattr(npu_wheels, "host_cann", lambda: None)  # CANN unknown: one wheel per CANN
    assert npu_wheels.host_hint().count("pip install --no-deps torch_npu==2.9.0") == 3
    monkeypatch.setattr(npu_wheels.md, "version",
                        lambda name: "2.14.1" if name == "torch" else real(name))
    hint = npu_wheels.host_hint()  # no wheel pins this torch: keep the image's own torch
    assert "torch 2.14.1 has none" in hint and "make install TORCH_SPEC=" in hint
    assert "pip install" not in hint


def test_unknown_device_type_names_the_allowed_ones():
    with pytest.raises(ConfigError, match="allowed: cpu, cuda, npu"):
        DeviceAdapter("tpu")


def test_auto_falls_back_to_cpu_here(monkeypatch, caplog):
    monkeypatch.setitem(__import__("sys").modules, "torch_npu", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level("INFO"):
        adapter = auto_select(order=["npu", "cuda", "cpu"])
    assert adapter.name == "cpu" and adapter.requested == "auto"
    assert "device=auto chose cpu" in caplog.text


def test_auto_without_cpu_in_order_fails_clearly(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch_npu", None)
    with pytest.raises(DeviceUnavailableError, match="Add cpu to device.order"):
        auto_select(order=["npu"])


class FakeRuntime:
    """Stands in for torch.npu: the adapter must only use the shared accelerator API."""

    def __init__(self):
        self.calls = []
        self.matmul = types.SimpleNamespace(allow_hf32=True)
        self.conv = types.SimpleNamespace(allow_hf32=True)

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def synchronize(self, device):
        self.calls.append(("synchronize", str(device)))

    def reset_peak_memory_stats(self, device):
        self.calls.append(("reset", str(device)))

    def max_memory_allocated(self, device):
        return 3 * 1024 * 1024

    def max_memory_reserved(self, device):
        return 4 * 1024 * 1024

    def get_device_name(self, index):
        return "Ascend910B4"

    def Event(self, enable_timing):  # noqa: N802 - mirrors torch.npu.Event
        return ("event", enable_timing)

    def set_device(self, index):  # torch.npu.set_device: the adapter selects its card first
        self.card = index

    def set_option(self, option):  # torch.npu.set_option (ACL_PRECISION_MODE on pre-910B chips)
        self.options = {**getattr(self, "options", {}), **option}


def test_npu_adapter_through_the_runtime_table(monkeypatch):
    fake = FakeRuntime()
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "restored-after-the-test")
    monkeypatch.setitem(runtime.RUNTIMES, "npu",
                        runtime.RuntimeSpec(lambda: fake, "missing", "no device"))
    adapter = DeviceAdapter("npu", env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"})
    adapter.synchronize()
    adapter.reset_peak_memory()
    assert fake.calls == [("synchronize", "0"), ("reset", "0")]
    assert adapter.peak_memory_mb()["peak_allocated_mb"] == 3.0
    assert adapter.device_name() == "Ascend910B4"
    assert adapter.new_event() == ("event", True)
    assert fake.matmul.allow_hf32 is False and fake.conv.allow_hf32 is False, (
        "HF32 must be off by default")
    assert adapter.info()["env_set"] == {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
