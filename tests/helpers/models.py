"""Tiny models built in code (seeded, float32, eval mode): nothing is downloaded."""

from __future__ import annotations

import torch

# The tiny FLUX.2-style decoder used across the tests: the same class as flux2_small_decoder.
TINY_FLUX2_ARCH = dict(
    down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
    up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
    block_out_channels=[8, 16],
    decoder_block_out_channels=[8, 16],
    layers_per_block=1,
    latent_channels=4,
    norm_num_groups=4,
    sample_size=32,
)


def build_tiny_flux2(seed: int = 0) -> torch.nn.Module:
    """A seeded tiny ``AutoencoderKLFlux2`` (float32, eval mode)."""
    from diffusers import AutoencoderKLFlux2

    torch.manual_seed(seed)
    return AutoencoderKLFlux2(**TINY_FLUX2_ARCH).eval()


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """True when two modules hold the same tensors under the same names."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
