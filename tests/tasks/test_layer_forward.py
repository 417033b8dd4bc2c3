"""One layer forward on a seeded input, and its determinism check."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.checks import CheckContext
from ascendbench.tasks.inputs import describe
from ascendbench.tasks.layer_forward import LayerForwardTask

MINI = {"height": 256, "width": 256, "num_frames": 9, "batch_size": 1}


def _conv():
    torch.manual_seed(0)
    return torch.nn.Conv3d(8, 32, 3, padding=1).eval()


def test_input_is_the_seeds_latent_shape_or_given_outright():
    task = LayerForwardTask(channels=128, spatial_compression=32, temporal_compression=8,
                            input_name="latent")
    latent = task.make_inputs(MINI, 42)["latent"]
    assert latent.shape == (1, 128, 2, 8, 8) and latent.dtype == torch.float32
    seeded = describe(task.make_inputs(MINI, 42))["latent"]["sha256"]
    assert describe({"latent": latent})["latent"]["sha256"] == seeded
    assert LayerForwardTask(input_shape=[2, 4, 5]).make_inputs(MINI, 0)["input"].shape == (2, 4, 5)
    assert LayerForwardTask(channels=4, spatial_compression=8).shape(MINI) == (1, 4, 32, 32)
    with pytest.raises(TaskError, match=r"needs either `input_shape` .* or `channels`"):
        LayerForwardTask().shape(MINI)


def test_forward_is_the_modules_own():
    task = LayerForwardTask(channels=8, spatial_compression=32, temporal_compression=8,
                            input_name="latent")
    inputs, conv = task.make_inputs(MINI, 0), _conv()
    out = task.run(conv, inputs)["output"]
    expected = torch.nn.functional.conv3d(inputs["latent"], conv.weight, conv.bias, padding=1)
    assert torch.equal(out, expected)
    assert task.items_per_call(inputs) == 1 and task.unit == "calls"


def test_determinism_check_runs_again_and_compares_with_the_first_call():
    task = LayerForwardTask(channels=8, spatial_compression=32, temporal_compression=8,
                            input_name="latent")
    inputs, conv = task.make_inputs(MINI, 0), _conv().to(torch.bfloat16)
    outputs = task.run(conv, {"latent": inputs["latent"].bfloat16()})
    first = {k: v.to("cpu") for k, v in outputs.items()}
    rules = {"second_run_max_abs_diff": {"max": 0.0, "source": "seed"}}
    cpu, name = torch.device("cpu"), "determinism/second_run_max_abs_diff"
    entry = task.checks(CheckContext(conv, cpu, torch.bfloat16, inputs, first, {}, rules))[name]
    assert entry["value"] == 0.0 and entry["verdict"] == "PASS" and entry["details"]["identical"]
    seen = entry["details"]["device_input"]
    assert seen["dtype"] == "bfloat16" and seen["shape"] == [1, 8, 2, 8, 8]
    assert seen["sha256"].startswith("sha256:")
    drifted = {"output": first["output"].float() + 0.5}  # exact in float32
    entry = task.checks(CheckContext(conv, cpu, torch.bfloat16, inputs, drifted, {}, rules))[name]
    assert entry["value"] == 0.5 and entry["verdict"] == "FAIL"
    assert LayerForwardTask(channels=8, determinism_check=False).checks(None) == {}
