"""The VAE decode task: deterministic latents shaped by the preset."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import TaskError
from ascendbench.tasks.inputs import describe
from ascendbench.tasks.vae_decode import VaeDecodeTask

from helpers import build_tiny_flux2

PRESET = {"height": 32, "width": 48, "batch_size": 2}


def test_latent_follows_preset_and_seed():
    task = VaeDecodeTask(latent_channels=4, spatial_compression=2)
    a, b = task.make_inputs(PRESET, seed=42), task.make_inputs(PRESET, seed=42)
    assert a["latent"].shape == (2, 4, 16, 24) and a["latent"].dtype == torch.float32
    assert torch.equal(a["latent"], b["latent"])
    assert not torch.equal(a["latent"], task.make_inputs(PRESET, seed=43)["latent"])
    expected = torch.randn((2, 4, 16, 24), generator=torch.Generator("cpu").manual_seed(42))
    assert torch.equal(a["latent"], expected)


def test_flux2_mini_latent_is_32_channels_at_one_eighth():
    task = VaeDecodeTask(latent_channels=32, spatial_compression=8)
    assert task.latent_shape({"height": 256, "width": 256, "batch_size": 1}) == (1, 32, 32, 32)


def test_sizes_not_divisible_are_refused_with_the_fix():
    task = VaeDecodeTask(latent_channels=32, spatial_compression=8)
    with pytest.raises(TaskError, match=r"preset.height=250 .* multiples .* 8"):
        task.latent_shape({"height": 250, "width": 256, "batch_size": 1})


def test_run_decodes_to_images_and_describe_hashes_inputs():
    task = VaeDecodeTask(latent_channels=4, spatial_compression=2)
    inputs = task.make_inputs(PRESET, seed=0)
    out = task.run(build_tiny_flux2(), inputs)
    assert out["image"].shape == (2, 3, 32, 48) and task.items_per_call(inputs) == 2
    info = describe(inputs)["latent"]
    assert info["shape"] == [2, 4, 16, 24] and info["dtype"] == "float32"
    assert info["sha256"].startswith("sha256:")
