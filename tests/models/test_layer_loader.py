"""One layer read out of a real safetensors checkpoint by tensor-name prefix, into a module."""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.layer import SafetensorsLayerLoader

TINY_VAE = dict(latent_channels=8, block_out_channels=(8, 16, 32, 64),
                decoder_block_out_channels=(8, 16, 32),
                layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
                spatial_compression_ratio=32, temporal_compression_ratio=8)
CONV_IN = {"_target_": "torch.nn.Conv3d", "in_channels": 8, "out_channels": 32, "kernel_size": 3,
           "padding": 1}


@pytest.fixture(scope="module")
def vae_dir(tmp_path_factory):
    """The tiny LTX-2 VAE saved like the real checkpoint's vae/ folder (bf16 safetensors)."""
    from diffusers import AutoencoderKLLTX2Video

    root = tmp_path_factory.mktemp("ltx2_vae")
    torch.manual_seed(0)
    vae = AutoencoderKLLTX2Video(**TINY_VAE).to(torch.bfloat16)
    vae.save_pretrained(root / "vae")
    return root, vae


def _config_loader(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        cfg = compose(config_name="config",
                      overrides=["model=tiny_ltx_video_vae_conv_in", *overrides])
    GlobalHydra.instance().clear()
    return cfg, instantiate(cfg.model.loader)


def test_the_layer_is_the_checkpoints_tensors_exactly(vae_dir):
    root, vae = vae_dir
    cfg, loader = _config_loader("model.loader.subfolder=vae")
    assert cfg.model.loader.module._target_ == "torch.nn.Conv3d", "Hydra left the spec alone"
    loaded = loader.load(str(root), "required", 42)
    conv = vae.decoder.conv_in.conv
    assert isinstance(loaded.module, torch.nn.Conv3d)
    assert loaded.module.weight.dtype == torch.float32
    assert torch.equal(loaded.module.weight, conv.weight.float())
    assert torch.equal(loaded.module.bias, conv.bias.float())
    info = loaded.weights
    assert info["kind"] == "loaded" and info["prefix"] == "decoder.conv_in.conv."
    assert info["num_params"] == 8 * 32 * 27 + 32
    stats = info["tensors"]["decoder.conv_in.conv.weight"]
    assert stats["shape"] == [32, 8, 3, 3, 3] and stats["dtype"] == "bfloat16"
    assert abs(stats["mean"] - conv.weight.double().mean().item()) < 1e-12
    again = loader.load(str(root / "vae" / "diffusion_pytorch_model.safetensors"), "required")
    assert info["digest"] == again.weights["digest"]


def test_wrong_prefix_or_shape_lists_what_does_not_fit(vae_dir):
    root, _ = vae_dir
    wrong_shape = SafetensorsLayerLoader({**CONV_IN, "out_channels": 16}, "decoder.conv_in.conv.",
                                         subfolder="vae")
    with pytest.raises(WeightsLoadError,
                       match=r"shape mismatches \(first: \['bias \(32,\) vs \(16,\)'"):
        wrong_shape.load(str(root), "required")
    wrong_prefix = SafetensorsLayerLoader(CONV_IN, "decoder.conv_in.", subfolder="vae",
                                          filename="diffusion_pytorch_model.safetensors")
    with pytest.raises(WeightsLoadError,
                       match=r"unexpected keys \(first: \['conv.bias', 'conv.weight'\]"):
        wrong_prefix.load(str(root), "required")
    absent = SafetensorsLayerLoader(CONV_IN, "decoder.nothing.", subfolder="vae")
    with pytest.raises(WeightsLoadError,
                       match=r"expected one checkpoint file .* holding it, found 0"):
        absent.load(str(root), "required")


def test_random_init_is_seeded_and_weights_required_fails_cleanly(tmp_path):
    loader = SafetensorsLayerLoader(CONV_IN, "decoder.conv_in.conv.")
    a, b = loader.load(None, "random", 42), loader.load(str(tmp_path / "absent"), "auto", 42)
    assert torch.equal(a.module.weight, b.module.weight) and b.weights["kind"] == "random-init"
    with pytest.raises(WeightsNotFoundError,
                       match=r"model.weights=required but no weights were found"):
        loader.load(str(tmp_path / "absent"), "required", 42)


def test_module_spec_without_target_is_a_config_error():
    with pytest.raises(ConfigError, match=r"model.loader.module needs a `_target_`"):
        SafetensorsLayerLoader({"in_channels": 8}, "x.")
