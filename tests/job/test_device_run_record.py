"""What the device run adds to the record: the task's sizes, output summaries, the "ran on the
device" check (with a planted CPU-fallback warning) and the opt-in profiler section."""

from __future__ import annotations

import json
import warnings

import pytest

from ascendbench.tasks.layer_forward import LayerForwardTask
from ascendbench.tasks.text_to_video import TextToVideoTask
from ascendbench.tasks.vae_decode import VaeDecodeTask, VideoDecodeTask

from helpers import TINY_RUN, read_record

FAST = ["model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process",
        "compare.visual.enabled=false",
        "artifacts.media=false"]
FALLBACK = ("The operator 'aten::_fake_op' is not currently supported on the NPU backend and will "
            "fall back "
            "to run on the CPU. This may have performance implications.")


def test_the_record_carries_sizes_output_summaries_and_a_clean_placement_check(cli):
    result, job = cli(*FAST)
    assert result.returncode == 0, result.stderr
    record = read_record(job)
    assert record["job"]["sizes"] == {"batch_size": 1, "height": 32, "width": 32}
    assert "num_frames" not in record["job"] and "steps" not in record["job"]
    (name, summary), = record["outputs"].items()
    assert summary["shape"][-2:] == [32, 32] and summary["dtype"] == "float32"
    assert summary["min"] <= summary["mean"] <= summary["max"] and summary["std"] > 0
    check = record["placement_check"]
    assert check["ok"] and check["fallback_ops"] == [] and check["parameters"]["off_device"] == 0
    assert record["metrics"]["placement_findings"]["verdict"] == "PASS"
    assert "profile" not in record, "the profiler is opt-in"


@pytest.fixture
def falling_back(monkeypatch):
    """The decoder's task warns as torch_npu does when an operator falls back to the CPU."""
    run = VaeDecodeTask.run

    def warned(self, model, inputs):
        warnings.warn(FALLBACK, UserWarning, stacklevel=2)
        return run(self, model, inputs)

    monkeypatch.setattr(VaeDecodeTask, "run", warned)


def test_a_cpu_fallback_is_a_recorded_warn_with_the_op_name(cli, falling_back):
    result, job = cli(*FAST)
    assert result.returncode == 0, result.stderr
    record = read_record(job)
    assert record["placement_check"]["fallback_ops"] == ["aten::_fake_op"]
    entry = record["metrics"]["placement_findings"]
    assert entry["verdict"] == "WARN" and entry["fallback_ops"] == ["aten::_fake_op"]
    assert record["verdict"] == "WARN"


def test_a_rule_on_placement_findings_turns_a_fallback_into_fail_and_exit_1(cli, falling_back):
    result, job = cli(*FAST, "+model.thresholds.placement_findings={max:0,source:test}")
    assert result.returncode == 1
    record = read_record(job)
    assert record["metrics"]["placement_findings"]["verdict"] == "FAIL"
    assert record["verdict"] == "FAIL"


def test_profile_enabled_lists_top_operators_and_writes_the_trace(cli):
    result, job = cli(*FAST, "profile.enabled=true", "profile.calls=1", "profile.top=5")
    assert result.returncode == 0, result.stderr
    profile = read_record(job)["profile"]
    assert profile["calls"] == 1 and 0 < len(profile["top"]) <= 5
    assert any("conv" in row["name"] for row in profile["top"]), profile["top"]
    assert profile["ops_total_ms_per_call"] > 0 and profile["measured_median_ms"] > 0
    trace = json.loads((job / profile["trace"]).read_text())
    assert trace["traceEvents"]


def test_every_task_names_the_sizes_it_uses():
    preset = {"batch_size": 2, "height": 64, "width": 48, "num_frames": 9, "steps": 4}
    assert VaeDecodeTask.preset_keys == ("batch_size", "height", "width")
    assert VideoDecodeTask.preset_keys[-1] == "num_frames"
    assert TextToVideoTask.preset_keys[-2:] == ("num_frames", "steps")
    layer = LayerForwardTask(input_shape=[2, 8, 4, 4])
    assert layer.sizes(preset) == {"input_shape": [2, 8, 4, 4]}
