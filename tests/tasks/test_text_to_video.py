"""Text to video on the tiny LTX and LTX-2 pipelines: preset sizes, CPU seeding, [-1, 1] frames."""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from ascendbench.bench.phases import PhaseTimer
from ascendbench.errors import ConfigError, TaskError
from ascendbench.tasks.inputs import place

TINY = {"height": 32, "width": 32, "num_frames": 9, "batch_size": 1, "steps": 2}


def _model(name: str):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"model={name}"])
    GlobalHydra.instance().clear()
    return instantiate(cfg.model.loader).load(None, "random",
                                              42).module, instantiate(cfg.model.task)


@pytest.fixture(scope="module")
def ltx():
    return _model("tiny_ltx_t2v")


def test_inputs_are_the_seed_and_sizes_are_checked(ltx):
    _, task = ltx
    assert torch.equal(task.make_inputs(TINY, 42)["seed"], torch.tensor([42]))
    with pytest.raises(TaskError, match=r"preset.num_frames=8 must be 1 \+ a multiple"):
        task.make_inputs({**TINY, "num_frames": 8}, 42)
    with pytest.raises(TaskError, match=r"multiples of the model's spatial compression 8"):
        task.make_inputs({**TINY, "height": 36}, 42)


def test_video_is_the_pipelines_frames_in_minus_one_one_and_reproducible(ltx):
    pipe, task = ltx
    inputs = task.make_inputs(TINY, 42)
    place(task, pipe, "cpu", torch.float32)
    video = task.run(pipe, inputs)["video"]
    assert video.shape == (1, 9, 3, 32, 32) and task.video_layout == "BTCHW"
    assert task.items_per_call(inputs) == 9
    assert video.min() >= -1 and video.max() <= 1 and video.std() > 0
    direct = pipe(prompt=task.prompt, negative_prompt=task.negative_prompt, height=32, width=32,
                  num_frames=9, num_inference_steps=2, output_type="pt", **task.call_kwargs,
                  generator=torch.Generator("cpu").manual_seed(42)).frames
    # the same CPU-generator noise, the same call, mapped to [-1, 1]
    assert torch.equal(video, direct * 2 - 1)
    assert torch.equal(task.run(pipe, inputs)["video"], video)
    assert not torch.equal(task.run(pipe, task.make_inputs(TINY, 7))["video"], video)


def test_reference_precision_and_placement_options(ltx):
    pipe, task = ltx
    inputs = task.make_inputs(TINY, 42)
    placed = place(task, pipe, "cpu", torch.float64)
    assert placed.transformer.dtype == placed.text_encoder.dtype == torch.float64
    assert task.run(placed, inputs)["video"].dtype == torch.float64
    task.cpu_offload, task.vae = True, {"enable_tiling": True}
    try:
        place(task, pipe, "cpu", torch.float32)
        assert task.applied["cpu_offload"] is False, "nothing to offload to on the CPU"
        assert pipe.vae.use_tiling and task.applied["vae"]["enable_tiling"]
    finally:
        task.cpu_offload, task.vae = False, {}
        place(task, pipe, "cpu", torch.float32)


def test_offload_on_an_accelerator_without_accelerate_says_what_to_install(ltx, monkeypatch):
    import importlib.util

    pipe, task = ltx
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "accelerate" else real(name, *a))
    task.cpu_offload = True
    try:
        with pytest.raises(ConfigError, match=r"cpu_offload=true .* needs the accelerate package"):
            task.to(pipe, torch.device("meta"), torch.float32)
    finally:
        task.cpu_offload = False
        place(task, pipe, "cpu", torch.float32)


def test_phases_are_timed_per_call(ltx):
    pipe, task = ltx
    inputs = task.make_inputs(TINY, 42)
    timer = PhaseTimer()
    assert task.attach_phase_timer(pipe, timer) is True
    try:
        timer.reset()
        task.run(pipe, inputs)
        phases = timer.result()
    finally:
        timer.remove_hooks()
        task._timer = None
    assert len(phases["step"]) == 2 and len(phases["vae_decode"]) == 1 and phases["text_encoding"]


def test_ltx2_twin_generates_video_and_audio():
    pipe, task = _model("tiny_ltx2_t2v")
    assert type(pipe).__name__ == "LTX2Pipeline"
    assert type(pipe.text_encoder).__name__ == "Gemma3ForConditionalGeneration"
    inputs = task.make_inputs(TINY, 42)
    place(task, pipe, "cpu", torch.float32)
    out = task.run(pipe, inputs)
    assert out["video"].shape == (1, 9, 3, 32, 32) and out["video"].abs().max() <= 1
    assert out["audio"].dim() == 3 and out["audio"].shape[:2] == (1, 2)
