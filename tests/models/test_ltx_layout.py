"""The original LTX single-file layout, found by inverting diffusers' own converters."""

from __future__ import annotations

import pytest
import torch
from diffusers import AutoencoderKLLTXVideo, LTXVideoTransformer3DModel
from diffusers.loaders.single_file_utils import (
    convert_ltx_transformer_checkpoint_to_diffusers,
    convert_ltx_vae_checkpoint_to_diffusers,
)

from ascendbench.errors import WeightsLoadError
from ascendbench.models.ltx_layout import invert_keys, original_layout


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    transformer = LTXVideoTransformer3DModel(in_channels=8, out_channels=8, num_attention_heads=2,
                                             attention_head_dim=8, cross_attention_dim=16,
                                             num_layers=2, caption_channels=16)
    vae = AutoencoderKLLTXVideo(latent_channels=8, block_out_channels=(8, 8, 8, 8),
                                decoder_block_out_channels=(8, 8, 8, 8),
                                layers_per_block=(1, 1, 1, 1, 1),
                                decoder_layers_per_block=(1, 1, 1, 1, 1),
                                spatio_temporal_scaling=(True, True, True, False),
                                decoder_spatio_temporal_scaling=(True, True, True, False),
                                decoder_inject_noise=(False,) * 5, upsample_residual=(False,) * 4,
                                upsample_factor=(1,) * 4, patch_size=1, decoder_causal=False)
    return transformer, vae


def test_keys_are_in_lightricks_layout(parts):
    transformer, vae = parts
    layout = original_layout(transformer, vae)
    assert len(layout) == len(transformer.state_dict()) + len(vae.state_dict())
    assert "model.diffusion_model.patchify_proj.weight" in layout  # diffusers: proj_in
    assert "model.diffusion_model.adaln_single.linear.weight" in layout  # diffusers: time_embed
    # diffusers: norm_q
    assert "model.diffusion_model.transformer_blocks.0.attn1.q_norm.weight" in layout
    assert "vae.per_channel_statistics.mean-of-means" in layout  # diffusers: latents_mean
    assert any(k.startswith("vae.decoder.up_blocks.") and ".res_blocks." in k for k in layout)
    diffusers_keys = ("proj_in", "decoder.", "encoder.")
    assert not any(".resnets." in k or k.startswith(diffusers_keys) for k in layout)


def test_diffusers_converts_the_file_back_exactly(parts):
    transformer, vae = parts
    layout = original_layout(transformer, vae)
    back_t = convert_ltx_transformer_checkpoint_to_diffusers(dict(layout))
    back_v = convert_ltx_vae_checkpoint_to_diffusers(dict(layout))
    for module, back in ((transformer, back_t), (vae, back_v)):
        state = module.state_dict()
        assert set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)


def test_a_layout_the_converter_cannot_produce_is_refused():
    state = {"decoder.unheard_of.weight": torch.zeros(2)}
    with pytest.raises(WeightsLoadError, match=r"no original LTX key converts to 1 diffusers keys"):
        invert_keys(state, lambda key: {"model.diffusion_model.something_else"},
                    convert_ltx_transformer_checkpoint_to_diffusers)
