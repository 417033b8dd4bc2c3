"""Video VAE decode: 5-D latents shaped by the preset, the LTX-2 VAE's options, frame counts."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import ConfigError, TaskError
from ascendbench.tasks.inputs import place
from ascendbench.tasks.vae_decode import VideoDecodeTask, latent_shape

MINI = {"height": 256, "width": 256, "num_frames": 9, "batch_size": 1}


def _tiny_vae():
    from diffusers import AutoencoderKLLTX2Video

    torch.manual_seed(0)
    return AutoencoderKLLTX2Video(latent_channels=8, block_out_channels=(8, 16, 32, 64),
                                  decoder_block_out_channels=(8, 16, 32),
                                  layers_per_block=(1, 1, 1, 1, 1),
                                  decoder_layers_per_block=(1, 1, 1, 1),
                                  spatial_compression_ratio=32, temporal_compression_ratio=8).eval()


@pytest.mark.parametrize("preset, shape", [
    (MINI, (1, 128, 2, 8, 8)),
                                                             # the seed's latent
    ({"height": 320, "width": 512, "num_frames": 65, "batch_size": 1},
     (1, 128, 9, 10, 16)),   # balanced
    ({"height": 480, "width": 704, "num_frames": 161, "batch_size": 2},
     (2, 128, 21, 15, 22)),  # quality
])
def test_latent_shape_follows_the_ltx_presets(preset, shape):
    assert VideoDecodeTask(128, 32, 8).latent_shape(preset) == shape


def test_latent_is_seeded_on_a_cpu_generator():
    task = VideoDecodeTask(8, 32, 8)
    a = task.make_inputs(MINI, 42)["latent"]
    expected = torch.randn((1, 8, 2, 8, 8), generator=torch.Generator("cpu").manual_seed(42))
    assert torch.equal(a, expected)
    assert not torch.equal(a, task.make_inputs(MINI, 43)["latent"])


@pytest.mark.parametrize("preset, match", [
    ({**MINI, "num_frames": 10},
     r"preset.num_frames=10 must be 1 \+ a multiple of .* 8 .*`preset.num_frames=9`"),
    ({**MINI, "height": 250},
     r"preset.height=250 .* multiples of the model's spatial compression 32"),
])
def test_sizes_the_vae_cannot_take_are_refused_with_the_fix(preset, match):
    with pytest.raises(TaskError, match=match):
        latent_shape(preset, 128, 32, 8)


def test_decode_gives_frames_and_counts_them():
    task = VideoDecodeTask(8, 32, 8)
    inputs = task.make_inputs({"height": 64, "width": 64, "num_frames": 9, "batch_size": 1}, 0)
    out = task.run(place(task, _tiny_vae(), "cpu", torch.float32), inputs)["video"]
    assert out.shape == (1, 3, 9, 64, 64) and task.items_per_call(inputs) == 9
    assert task.output_kind == "video" and task.video_layout == "BCTHW"


def test_vae_options_are_applied_wherever_the_vae_is_placed():
    vae = _tiny_vae()
    task = VideoDecodeTask(8, 32, 8, vae={"enable_slicing": True, "enable_tiling": True,
                                          "tiling": {"tile_sample_min_height": 128}})
    placed = place(task, vae, "cpu", torch.float64)
    assert placed.use_slicing and placed.use_tiling and placed.tile_sample_min_height == 128
    assert next(placed.parameters()).dtype == torch.float64
    place(VideoDecodeTask(8, 32, 8), vae, "cpu", torch.float32)
    assert not vae.use_slicing and not vae.use_tiling
    with pytest.raises(ConfigError, match=r"vae options \['slicing'\] are not known"):
        place(VideoDecodeTask(8, 32, 8, vae={"slicing": True}), vae, "cpu", torch.float32)
