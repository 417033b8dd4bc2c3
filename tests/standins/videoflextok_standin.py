"""STAND-IN for the ``videoflextok`` package, for tests only: a tiny real video tokenizer.

It is not VideoFlexTok. It mirrors what ascendbench touches of ``videoflextok.wrappers.
VideoFlexTokFromHub`` so the loader, the task, the gates and the ``flex_attention_dense`` patch can
be tested without the package (which is not on PyPI and pins torch 2.8):

* ``PyTorchModelHubMixin`` with ``__init__(self, config: dict)``: ``save_pretrained`` writes
  ``config.json`` + ``model.safetensors``, ``from_pretrained(dir, strict=False)`` loads them;
* ``tokenize(videos [B, 3, T, H, W]) -> [ids [1, t, n], ...]`` and ``detokenize(tokens_list,
  timesteps=N, noise_list=[...], guidance_scale=g) -> [video [1, 3, T, H, W], ...]``, chunked like
  upstream (``chunk_size`` frames per chunk, the same noise for every chunk);
* ``chunk_size``, ``vae_video_sizes``, ``video_preprocess_args`` and
  ``video_tokenizer.{vae, encoder, regularizer, decoder}`` with an FSQ regularizer (``_levels``,
  ``codebook_size``);
* attention modules keeping ``self.flex_attention`` (eager ``torch.nn.attention.flex_attention``;
  upstream stores ``torch.compile(flex_attention)``) and a sequence packer keeping
  ``self.create_block_mask``, building upstream's padded time-block-causal mask (padding rows fully
  masked).

Architecture: a patchify conv "VAE" (p x p pixels -> 3p^2 channels), a transformer encoder over the
patch tokens, FSQ, and a rectified-flow decoder (a transformer predicting the clean latent)
integrated over ``timesteps`` Euler steps, then the transposed conv. :func:`build_pretrained` sets
weights by hand so that it really reconstructs (block means, FSQ-quantised): the "pretrained" model
of the tests, against which the same architecture randomly initialised is the control.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from huggingface_hub import PyTorchModelHubMixin
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DEFAULT_CONFIG = {
    "levels": [8, 8, 8],
    "patch_size": 4,
    "heads": 2,
    "encoder_depth": 1,
    "decoder_depth": 2,
    "chunk_size": 9,
    "vae_video_sizes": [9, 8, 8],
    "video_preprocess_args": {"size": 32},
}


class FSQ(nn.Module):
    """Finite scalar quantisation of ``[-1, 1]`` codes into ``prod(levels)`` ids."""

    def __init__(self, levels: list[int]) -> None:
        super().__init__()
        self.register_buffer("_levels", torch.tensor(levels, dtype=torch.int64), persistent=False)
        basis = torch.cumprod(torch.tensor([1] + list(levels[:-1])), dim=0)
        self.register_buffer("_basis", basis, persistent=False)
        self.codebook_size = int(math.prod(levels))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        digits = ((z.clamp(-1, 1) + 1) / 2 * (self._levels - 1)).round().long()
        return (digits * self._basis).sum(-1)

    def indices_to_embedding(self, ids: torch.Tensor) -> torch.Tensor:
        digits = (ids.unsqueeze(-1) // self._basis) % self._levels
        return digits.float() / (self._levels - 1) * 2 - 1


class FlexAttention(nn.Module):
    """Multi-head self-attention through a ``flex_attention`` callable kept on the instance."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.proj = (nn.Linear(dim, dim) for _ in range(4))
        self.flex_attention = flex_attention

    def forward(self, x: torch.Tensor, block_mask) -> torch.Tensor:
        split = lambda t: t.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # noqa: E731
        out = self.flex_attention(split(self.wq(x)), split(self.wk(x)), split(self.wv(x)),
                                  block_mask=block_mask)
        return self.proj(out.transpose(1, 2).flatten(-2))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = FlexAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor, block_mask) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), block_mask)
        return x + self.mlp(self.norm2(x))


class SequencePacker(nn.Module):
    """Pads a frame-major token sequence to a multiple of 128 and builds the block mask."""

    def __init__(self, pad_to_multiple: int = 128) -> None:
        super().__init__()
        self.pad_to_multiple = pad_to_multiple
        self.create_block_mask = create_block_mask

    def forward(self, x: torch.Tensor, frame_len: int):
        length = x.shape[1]
        padded = self.pad_to_multiple * math.ceil(length / self.pad_to_multiple)
        seq_ids = F.pad(torch.zeros(length, dtype=torch.long, device=x.device),
                        (0, padded - length), value=-1)
        block_ids = F.pad(torch.arange(length, device=x.device) // frame_len, (0, padded - length),
                          value=-1)

        def time_block_causal(b, h, q_idx, kv_idx):
            not_padded = (seq_ids[q_idx] != -1) | (seq_ids[kv_idx] != -1)
            same_seq = seq_ids[q_idx] == seq_ids[kv_idx]
            return same_seq & not_padded & (block_ids[kv_idx] <= block_ids[q_idx])

        mask = self.create_block_mask(time_block_causal, None, None, padded, padded,
                                      device=x.device)
        return F.pad(x, (0, 0, 0, padded - length)), mask


class Transformer(nn.Module):
    def __init__(self, dim: int, heads: int, depth: int) -> None:
        super().__init__()
        self.packer = SequencePacker()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))

    def forward(self, x: torch.Tensor, frame_len: int) -> torch.Tensor:
        length = x.shape[1]
        x, mask = self.packer(x, frame_len)
        for block in self.blocks:
            x = block(x, mask)
        return x[:, :length]


class PatchVAE(nn.Module):
    def __init__(self, channels: int, patch: int) -> None:
        super().__init__()
        kernel = (1, patch, patch)
        self.encoder = nn.Conv3d(3, channels, kernel, stride=kernel)
        self.decoder = nn.ConvTranspose3d(channels, 3, kernel, stride=kernel)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encoder(video)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.decoder(latent).clamp(-1, 1)


class Encoder(nn.Module):
    def __init__(self, dim: int, heads: int, depth: int, code_dim: int) -> None:
        super().__init__()
        self.transformer = Transformer(dim, heads, depth)
        self.to_codes = nn.Linear(dim, code_dim)


class FlowDecoder(nn.Module):
    def __init__(self, dim: int, heads: int, depth: int, code_dim: int) -> None:
        super().__init__()
        self.cond_proj, self.x_proj = nn.Linear(code_dim, dim), nn.Linear(dim, dim)
        self.transformer = Transformer(dim, heads, depth)
        self.out = nn.Linear(dim, dim)

    def velocity(self, x: torch.Tensor, t: float, cond: torch.Tensor | None,
                 frame_len: int) -> torch.Tensor:
        hidden = self.x_proj(x) + (cond if cond is not None else 0.0)
        clean = self.out(self.transformer(hidden, frame_len))
        return (x - clean) / t


class VideoTokenizer(nn.Module):
    def __init__(self, config: dict) -> None:
        super().__init__()
        dim, levels = 3 * config["patch_size"] ** 2, config["levels"]
        self.vae = PatchVAE(dim, config["patch_size"])
        self.encoder = Encoder(dim, config["heads"], config["encoder_depth"], len(levels))
        self.regularizer = FSQ(levels)
        self.decoder = FlowDecoder(dim, config["heads"], config["decoder_depth"], len(levels))


def _to_tokens(latent: torch.Tensor) -> torch.Tensor:
    return latent.flatten(2).transpose(1, 2)  # [1, C, t, h, w] -> [1, t*h*w, C] (frame-major)


class VideoFlexTokStandIn(nn.Module, PyTorchModelHubMixin):
    """The stand-in of ``VideoFlexTokFromHub`` (see the module docstring)."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        config = {**DEFAULT_CONFIG, **config}
        self.chunk_size = int(config["chunk_size"])
        self.vae_video_sizes = list(config["vae_video_sizes"])
        self.video_preprocess_args = dict(config["video_preprocess_args"])
        self.video_tokenizer = VideoTokenizer(config)

    def _chunks(self, length: int) -> list[slice]:
        return [slice(s, s + self.chunk_size) for s in range(0, length, self.chunk_size)]

    def tokenize(self, videos: torch.Tensor) -> list[torch.Tensor]:
        """Token ids ``[1, t, n]`` per clip; chunks of ``chunk_size`` frames, concatenated on ``t``.
        """
        tok = self.video_tokenizer
        out = []
        for video in videos.split(1):
            ids = []
            for chunk in self._chunks(video.shape[2]):
                latent = tok.vae.encode(video[:, :, chunk])
                frame_len = latent.shape[-1] * latent.shape[-2]
                hidden = tok.encoder.transformer(_to_tokens(latent), frame_len)
                ids.append(tok.regularizer(tok.encoder.to_codes(hidden)).view(1, latent.shape[2],
                                                                              frame_len))
            out.append(torch.cat(ids, dim=1))
        return out

    def detokenize(self, token_ids_list: list[torch.Tensor], timesteps: int = 20, noise_list=None,
                   guidance_scale: float = 1.0, **kwargs) -> list[torch.Tensor]:
        """Videos ``[1, 3, T, H, W]`` decoded with ``timesteps`` Euler steps of the flow."""
        t, h, w = self.vae_video_sizes
        out = []
        for index, ids in enumerate(token_ids_list):
            chunks = []
            for start in range(0, ids.shape[1], t):
                noise = copy.deepcopy(noise_list[index]) if noise_list is not None else None
                chunks.append(self._decode_chunk(ids[:, start:start + t], noise, timesteps,
                                                 guidance_scale, (h, w)))
            out.append(torch.cat(chunks, dim=2))
        return out

    def _decode_chunk(self, ids, noise, steps, guidance_scale, grid):
        tok = self.video_tokenizer
        dim, frames = tok.decoder.out.in_features, ids.shape[1]
        ref = tok.decoder.out.weight
        codes = tok.regularizer.indices_to_embedding(ids.flatten(1)).to(ref.dtype)
        cond = tok.decoder.cond_proj(codes)
        if noise is None:
            noise = torch.randn(1, dim, frames, *grid, device=ref.device)
        x = _to_tokens(noise.to(device=ref.device, dtype=ref.dtype))
        frame_len = grid[0] * grid[1]
        for i in range(steps, 0, -1):
            time = i / steps
            v = tok.decoder.velocity(x, time, cond, frame_len)
            if guidance_scale != 1.0:
                uncond = tok.decoder.velocity(x, time, None, frame_len)
                v = uncond + guidance_scale * (v - uncond)
            x = x - v / steps
        latent = x.transpose(1, 2).reshape(1, dim, frames, *grid)
        return tok.vae.decode(latent)


@torch.no_grad()
def build_pretrained(config: dict | None = None, seed: int = 0) -> VideoFlexTokStandIn:
    """The stand-in with hand-set weights that reconstruct: patch means through FSQ and back.

    Attention and MLP residuals keep small random weights, so attention (and the patch) still
    changes the outputs a little.
    """
    torch.manual_seed(seed)
    model = VideoFlexTokStandIn({**DEFAULT_CONFIG,
                                 **(config or {})})  # the full config goes to config.json
    tok = model.video_tokenizer
    patch = model.video_tokenizer.vae.encoder.kernel_size[-1]
    dim, area = 3 * patch**2, patch**2
    one_hot = torch.eye(dim).view(dim, 3, 1, patch, patch)
    for conv in (tok.vae.encoder, tok.vae.decoder):
        conv.weight.copy_(one_hot)
        conv.bias.zero_()
    means = torch.zeros(3, dim)
    for channel in range(3):
        means[channel, channel * area:(channel + 1) * area] = 1.0 / area
    tok.encoder.to_codes.weight.copy_(means)
    tok.decoder.cond_proj.weight.copy_((means * area).T)
    tok.decoder.x_proj.weight.mul_(1e-3)
    tok.decoder.out.weight.copy_(torch.eye(dim))
    for linear in (tok.encoder.to_codes, tok.decoder.cond_proj, tok.decoder.x_proj,
                   tok.decoder.out):
        linear.bias.zero_()
    for transformer in (tok.encoder.transformer, tok.decoder.transformer):
        for block in transformer.blocks:
            block.attn.proj.weight.mul_(1e-2)
            block.mlp[-1].weight.zero_()
            for linear in (block.attn.proj, block.mlp[-1]):
                linear.bias.zero_()
    return model.eval()
