"""The bounded float64 reference: tiled convolutions and chunked attention equal the untiled
computation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ascendbench.baseline.bounded import BoundedFloat64, Bounds, conv_unfold_bytes, tile_shape
from ascendbench.tasks.vae_decode import VaeDecodeTask, VideoDecodeTask

from helpers import build_tiny_flux2

TINY = Bounds(conv_bytes=2048, attention_bytes=1024)  # splits every layer of the tiny models


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CONV2D = [  # (in, out, kernel, keyword arguments)
    (6, 4, 3, dict(padding=1)),
    (6, 4, 3, dict(padding=0)),
    (6, 4, 3, dict(padding=2, stride=2)),
    (6, 4, 3, dict(padding=3, dilation=3)),
    (6, 4, (3, 5), dict(padding=(1, 2), stride=(2, 1))),
    (6, 6, 3, dict(padding=1, groups=3)),
    (6, 4, 4, dict(padding="same")),
    (6, 4, 3, dict(padding="valid", stride=3)),
    (6, 4, 1, dict()),
]


@pytest.mark.parametrize("cin, cout, kernel, kwargs", CONV2D)
def test_tiled_conv2d_equals_the_untiled_one(cin, cout, kernel, kwargs):
    x, conv = _rand(2, cin, 19, 23), torch.nn.Conv2d(cin, cout, kernel, **kwargs).double()
    with torch.no_grad():
        expected = conv(x)
        with BoundedFloat64(TINY) as mode:
            got = conv(x)
    assert mode.stats.tiled_convolutions == 1 and mode.stats.conv_tiles > 4
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
def test_non_zero_padding_modes_are_tiled_after_their_pad(padding_mode):
    conv = torch.nn.Conv2d(4, 4, 3, padding=1, padding_mode=padding_mode).double()
    x = _rand(1, 4, 17, 17)
    with torch.no_grad(), BoundedFloat64(TINY) as mode:
        got = conv(x)
    torch.testing.assert_close(got, conv(x).detach(), rtol=1e-13, atol=1e-13)
    assert mode.stats.conv_tiles > 1


@pytest.mark.parametrize("kwargs", [dict(padding=1), dict(padding=(0, 1, 1), stride=(1, 2, 2)),
                                    dict(padding=(2, 1, 1), dilation=(2, 1, 1), groups=2)])
def test_tiled_conv3d_and_conv1d_equal_the_untiled_ones(kwargs):
    x, conv3 = _rand(1, 4, 6, 11, 13), torch.nn.Conv3d(4, 4, 3, **kwargs).double()
    y, conv1 = _rand(4, 50), torch.nn.Conv1d(4, 3, 5, padding=2).double()  # unbatched input
    with torch.no_grad():
        expected = conv3(x), conv1(y)
        with BoundedFloat64(Bounds(conv_bytes=4096)) as mode:
            got = conv3(x), conv1(y)
    assert mode.stats.tiled_convolutions == 2
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)


def test_other_dtypes_and_small_convolutions_pass_through():
    conv = torch.nn.Conv2d(2, 2, 3, padding=1)
    with torch.no_grad(), BoundedFloat64(Bounds(conv_bytes=1)) as mode:
        conv(torch.ones(1, 2, 8, 8))
        conv.double()(torch.ones(1, 2, 8, 8, dtype=torch.float64))
    with torch.no_grad(), BoundedFloat64() as untouched:
        conv(torch.ones(1, 2, 8, 8, dtype=torch.float64))
    assert (mode.stats.convolutions, mode.stats.tiled_convolutions) == (1, 1)
    assert (untouched.stats.convolutions, untouched.stats.tiled_convolutions) == (1, 0)


def test_tiles_respect_the_byte_limit():
    x, weight = _rand(1, 8, 40, 40), _rand(8, 8, 3, 3)
    per_position = conv_unfold_bytes(x, weight, 1, 1)
    tile = tile_shape((40, 40), 100_000 // per_position)
    assert per_position * tile[0] * tile[1] <= 100_000 and tile == (4, 40)
    assert tile_shape((3, 4), 1) == (1, 1) and tile_shape((3, 4), 100) == (3, 4)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_chunked_attention_equals_the_whole_one(mask):
    q, k, v = _rand(2, 3, 37, 8, seed=1), _rand(2, 3, 29, 8, seed=2), _rand(2, 3, 29, 8, seed=3)
    masks = {None: None, "bool": _rand(37, 29, seed=4) > 0, "float": _rand(2, 1, 37, 29, seed=5)}
    attn_mask = masks[mask]
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    with BoundedFloat64(TINY) as mode:
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        causal = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert (mode.stats.attentions, mode.stats.chunked_attentions) == (2, 1)
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=1e-13)
    whole = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.testing.assert_close(causal, whole, rtol=0, atol=0)


def test_tiny_flux2_decoder_decodes_the_same_bounded():
    model, task = build_tiny_flux2().double(), VaeDecodeTask(4, 2)
    made = task.make_inputs({"height": 48, "width": 40, "batch_size": 2}, 3)
    inputs = {k: v.double() for k, v in made.items()}
    expected = task.run(model, inputs)["image"]
    with BoundedFloat64(TINY) as mode:
        got = task.run(model, inputs)["image"]
    assert mode.stats.tiled_convolutions >= 10 and mode.stats.chunked_attentions == 1
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_tiny_ltx_video_vae_decodes_the_same_bounded():
    from diffusers import AutoencoderKLLTX2Video

    torch.manual_seed(0)
    vae = AutoencoderKLLTX2Video(latent_channels=8, block_out_channels=(8, 16, 32, 64),
                                 decoder_block_out_channels=(8, 16, 32),
                                 layers_per_block=(1, 1, 1, 1, 1),
                                 decoder_layers_per_block=(1, 1, 1, 1),
                                 decoder_spatial_padding_mode="reflect",
                                 spatial_compression_ratio=32, temporal_compression_ratio=8)
    vae = vae.eval().double()
    task = VideoDecodeTask(8, 32, 8)
    made = task.make_inputs({"height": 64, "width": 64, "num_frames": 9, "batch_size": 1}, 0)
    inputs = {k: v.double() for k, v in made.items()}
    expected = task.run(vae, inputs)["video"]
    with BoundedFloat64(Bounds(conv_bytes=64 << 10)) as mode:
        got = task.run(vae, inputs)["video"]
    assert mode.stats.tiled_convolutions >= 5
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_meta_tensors_are_tiled_too():
    """The memory estimate runs the same tiles on the meta device."""
    conv = torch.nn.Conv2d(4, 4, 3, padding=1, device="meta", dtype=torch.float64)
    with BoundedFloat64(TINY) as mode:
        out = conv(torch.empty(1, 4, 30, 30, device="meta", dtype=torch.float64))
    assert out.shape == (1, 4, 30, 30) and out.is_meta and mode.stats.conv_tiles > 1
