"""Card selection, ACL_PRECISION_MODE and allow_internal_format through a torch_npu-shaped fake
runtime."""

from __future__ import annotations

import pytest
import torch

from ascendbench.bench.budget import BenchBudget
from ascendbench.bench.loop import BenchLoop
from ascendbench.devices import runtime
from ascendbench.devices.adapter import DeviceAdapter
from ascendbench.errors import ConfigError

from helpers.npu_fake import FakeNpu


@pytest.fixture
def install(monkeypatch):
    def _install(fake, device="npu"):
        monkeypatch.setitem(runtime.RUNTIMES, device,
                            runtime.RuntimeSpec(lambda: fake, "missing", "no device"))
        return fake

    return _install


def _timed_run(adapter):
    budget = BenchBudget(warmup=0, min_iters=2, max_iters=2, stability=None)
    return BenchLoop(adapter, budget).run(lambda: {"out": torch.zeros(1)})


def test_index_one_times_card_one_and_opens_no_context_on_card_zero(install):
    fake = install(FakeNpu(names=("Ascend910B3", "Ascend910B4")))
    adapter = DeviceAdapter("npu", index=1)
    assert fake.log[0] == ("set_device", 1), (
        "the card is selected before anything else touches the runtime")
    _timed_run(adapter)
    records = [entry for entry in fake.log if entry[0] == "record"]
    assert records and all(card == 1 for _, card in records), records
    assert fake.contexts == {1}, "the compile-mode probe and the events stay on card 1"
    assert adapter.device_name() == "Ascend910B4" and adapter.info()["set_device"] == 1


def test_without_set_device_the_events_would_time_card_zero(install, monkeypatch):
    """The planted fault: the selection removed, every event lands on card 0 (what the check above
    catches)."""
    fake = install(FakeNpu())
    monkeypatch.setattr(fake, "set_device", lambda index: None)
    _timed_run(DeviceAdapter("npu", index=1))
    assert {card for kind, card, *_ in fake.log if kind == "record"} == {0}


def test_cuda_selects_its_card_too(install):
    fake = install(FakeNpu(names=("NVIDIA H200", "NVIDIA H200")), device="cuda")
    DeviceAdapter("cuda", index=1)
    assert fake.log[0] == ("set_device", 1)


@pytest.mark.parametrize("chip", ["Ascend910A", "Ascend910ProB", "Ascend910PremiumA"])
def test_a_pre_910b_chip_keeps_float32_float32(install, chip):
    fake = install(FakeNpu(names=(chip,)))
    adapter = DeviceAdapter("npu")
    assert ("option", "ACL_PRECISION_MODE", "must_keep_origin_dtype") in fake.log
    mode = adapter.info()["chip_options"]["precision_mode"]
    assert (mode["value"] == "must_keep_origin_dtype"
            and mode["chip_default"] == "allow_fp32_to_fp16")


def test_a2_and_a3_keep_their_default_and_the_user_can_choose(install):
    fake = install(FakeNpu(names=("Ascend910_9362",)))
    adapter = DeviceAdapter("npu")
    assert not [e for e in fake.log if e[0] == "option"], (
        "must_keep_origin_dtype is already the A2/A3 default")
    assert adapter.chip_options["precision_mode"]["value"] == "must_keep_origin_dtype"
    fake = install(FakeNpu(names=("Ascend910A",)))
    DeviceAdapter("npu", precision_mode="allow_fp32_to_fp16")
    assert ("option", "ACL_PRECISION_MODE", "allow_fp32_to_fp16") in fake.log
    with pytest.raises(ConfigError, match="device.precision_mode='fp16'.*allowed"):
        DeviceAdapter("npu", precision_mode="fp16")


def test_allow_internal_format_is_set_only_when_given_and_recorded(install):
    fake = install(FakeNpu())
    adapter = DeviceAdapter("npu")
    assert adapter.chip_options["allow_internal_format"]["value"] is None
    assert not [e for e in fake.log if e[:2] == ("option", "ALLOW_INTERNAL_FORMAT")]
    adapter = DeviceAdapter("npu", allow_internal_format=False)
    assert ("option", "ALLOW_INTERNAL_FORMAT", "disable") in fake.log
    assert adapter.info()["chip_options"]["allow_internal_format"] == {
        "value": False, "set_by": "device.allow_internal_format"}
    assert adapter.chip_options["cube_core_num"] == 20
