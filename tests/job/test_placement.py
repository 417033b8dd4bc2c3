"""The "ran on the device" check on fake placements, and a planted fault caught by a whole job."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from ascendbench.job.placement import (
    capture_warnings,
    fallback_ops,
    other_ranks,
    placement_check,
    placement_entry,
)

from helpers import TINY_RUN, read_record


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(1))


def _on_meta_except(model, keep_on_cpu):
    """Every tensor on the meta device (a stand-in accelerator) except those named ``keep_on_cpu``.
    """
    for name, param in list(model.named_parameters()):
        if name not in keep_on_cpu:
            module_name, _, attr = name.rpartition(".")
            setattr(model.get_submodule(module_name), attr, torch.nn.Parameter(param.to("meta")))
    model.scale = model.scale.to("meta")
    return model


def test_all_on_the_device_is_ok_with_a_census():
    model = _on_meta_except(TwoLayers(), keep_on_cpu=())
    check = placement_check(model, {"out": torch.zeros(1, device="meta")}, torch.device("meta"))
    assert check["ok"] and check["parameters"]["by_device_dtype"] == {"meta/float32": 5}
    assert check["outputs"]["off_device"] == 0 and check["fallback_ops"] == []


def test_a_planted_cpu_resident_parameter_is_caught_by_name():
    model = _on_meta_except(TwoLayers(), keep_on_cpu=("b.weight",))
    check = placement_check(model, {"out": torch.zeros(1, device="meta")}, torch.device("meta"))
    assert not check["ok"] and check["parameters"]["off_device"] == 1
    assert "b.weight (cpu)" in check["findings"][0]


def test_offloaded_models_keep_parameters_on_the_host_by_design():
    model = TwoLayers()
    check = placement_check(model, {"out": torch.zeros(1, device="meta")}, torch.device("meta"),
                            offloaded=True)
    assert check["ok"] and check["parameters_judged"] is False


def test_an_output_left_on_the_host_is_a_finding():
    model = _on_meta_except(TwoLayers(), keep_on_cpu=())
    check = placement_check(model, {"out": torch.zeros(1)}, torch.device("meta"))
    assert not check["ok"] and "output(s) are not on meta" in check["findings"][0]


def test_fallback_warnings_are_parsed_for_operator_names():
    messages = ["The operator 'aten::_unique2' is not currently supported on the NPU backend and "
                "will fall back "
                "to run on the CPU. This may have performance implications.",
                "CANN: aclnnFoo not found, fallback to aten::nonzero on cpu",
                "an unrelated warning"]
    assert fallback_ops(messages) == ["aten::_unique2", "aten::nonzero"]
    model = _on_meta_except(TwoLayers(), keep_on_cpu=())
    check = placement_check(model, {}, torch.device("meta"), messages=messages)
    assert not check["ok"] and "2 operator(s) fell back" in check["findings"][0]


def test_capture_records_every_repeat_and_re_emits_each_once():
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with capture_warnings() as capture:
            for _ in range(3):
                warnings.warn("fall back to run on the CPU: 'aten::foo'", stacklevel=1)
    assert len(capture) == 3 and len(outer) == 1


# -- the same fault through a whole job (device=cpu: the planted parameter sits on `meta`, off the
# device) --

JOB = ["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
       "compare.visual.enabled=false",
       "artifacts.media=false"]


@pytest.fixture
def planted_parameter(monkeypatch):
    """The device run places the model, then one parameter is left behind on another device."""
    from ascendbench.job.stages import device_run

    real_place = device_run.place

    def place_but_one(task, model, device, dtype):
        model = real_place(task, model, device, dtype)
        model.decoder.conv_out.register_parameter("left_behind",
                                                  torch.nn.Parameter(torch.zeros(2, device="meta")))
        return model

    monkeypatch.setattr(device_run, "place", place_but_one)


def test_a_job_catches_a_planted_off_device_parameter_as_warn(cli, planted_parameter):
    result, job = cli(*JOB)
    assert result.returncode == 0, result.stderr[-2000:]
    record = read_record(job)
    check = record["placement_check"]
    assert not check["ok"] and check["parameters"]["off_device"] == 1
    assert "decoder.conv_out.left_behind (meta)" in check["findings"][0]
    assert record["metrics"]["placement_findings"]["verdict"] == "WARN"
    assert record["verdict"] == "WARN"


def test_a_rule_makes_the_planted_parameter_fail_the_job(cli, planted_parameter):
    result, job = cli(*JOB, "+model.thresholds.placement_findings={max:0,source:test}")
    assert result.returncode == 1
    assert read_record(job)["metrics"]["placement_findings"]["verdict"] == "FAIL"


def test_capture_reads_lines_written_to_fd2_and_passes_them_on(capfd):
    line = ("CAUTION: The operator 'aten::_unique2' is not currently supported on the NPU backend "
            "and will fall "
            "back to run on the CPU. This may have performance implications.\n")
    with capture_warnings() as capture:
        os.write(2, line.encode())  # what the C++ log does: no Python object sees it
    assert fallback_ops(capture) == ["aten::_unique2"]
    assert capfd.readouterr().err == line, "the user still sees the line"


def test_only_npu_jobs_inherit_the_fallbacks_of_earlier_jobs_of_the_process(monkeypatch):
    from ascendbench.job import placement

    monkeypatch.setattr(placement, "_FALLBACKS_SEEN", set())
    monkeypatch.setitem(__import__("sys").modules, "torch_npu",
                        __import__("types").ModuleType("torch_npu"))
    model, seen = TwoLayers(), ["CAUTION: The operator 'aten::_unique2' is not currently supported "
                                "on the NPU "
                                "backend and will fall back to run on the CPU."]
    first = placement_check(model, {}, torch.device("cpu"), messages=seen, device_type="npu")
    cpu_job = placement_check(model, {}, torch.device("cpu"))
    later = placement_check(model, {}, torch.device("cpu"), device_type="npu")
    assert first["fallback_ops"] == ["aten::_unique2"]
    assert first["fallback_ops_earlier_in_process"] == []
    assert cpu_job["fallback_ops"] == []
    assert cpu_job["ok"], "a CPU job of the same process inherits nothing"
    assert later["fallback_ops_earlier_in_process"] == ["aten::_unique2"] and not later["ok"]


def test_a_multi_rank_npu_job_reports_rank_0_and_the_other_ranks_as_not_observable():
    seen = {"device": "npu", "findings": [], "fallback_ops": [], "not_observable": None}
    check = other_ranks(seen, world_size=4)
    assert "ranks 1-3: torch_npu prints no CPU-fallback warning" in check["not_observable"]
    entry = placement_entry(check, {"placement_findings": {"max": 0, "source": "test"}})
    assert entry["verdict"] == "WARN" and entry["not_observable"] == check["not_observable"]
    assert other_ranks({**seen, "device": "cpu"}, world_size=4)["not_observable"] is None
