"""A diffusers LTX-Video pipeline as one file in Lightricks' original key layout."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch
from diffusers.loaders.single_file_utils import (
    convert_ltx_transformer_checkpoint_to_diffusers,
    convert_ltx_vae_checkpoint_to_diffusers,
)
from safetensors.torch import save_file

from ascendbench.errors import WeightsLoadError

TRANSFORMER_PREFIX, VAE_PREFIX = "model.diffusion_model.", "vae."
# Inverse renames: (diffusers spelling, original spelling); each may or may not apply to a key.
_TRANSFORMER_RENAMES = (("proj_in", "patchify_proj"), ("time_embed", "adaln_single"),
                        ("norm_q", "q_norm"), ("norm_k", "k_norm"))
_VAE_RENAMES = (("resnets", "res_blocks"), ("conv_shortcut.conv", "conv_shortcut"),
                ("norm3", "norm3.norm"), ("time_embedder", "last_time_embedder"),
                ("scale_shift_table", "last_scale_shift_table"))
_VAE_SPECIAL = {"latents_mean": "per_channel_statistics.mean-of-means",
                "latents_std": "per_channel_statistics.std-of-means"}
_VAE_BLOCK = re.compile(r"^(encoder|decoder)\.(mid_block|(?:up|down)_blocks\.\d+"
                        r"(?:\.(?:upsamplers\.0|downsamplers\.0|conv_in|conv_out))?)\.(.+)$")
_MAX_ORIGINAL_BLOCKS = 12


def _spellings(key: str, renames: Iterable[tuple[str, str]]) -> set[str]:
    applicable = [(new, old) for new, old in renames if new in key]
    out = set()
    for mask in itertools.product((False, True), repeat=len(applicable)):
        spelled = key
        for (new, old), use in zip(applicable, mask, strict=True):
            spelled = spelled.replace(new, old) if use else spelled
        out.add(spelled)
    return out


def _transformer_candidates(key: str) -> set[str]:
    return {TRANSFORMER_PREFIX + k for k in _spellings(key, _TRANSFORMER_RENAMES)}


def _vae_candidates(key: str) -> set[str]:
    if key in _VAE_SPECIAL:
        return {VAE_PREFIX + _VAE_SPECIAL[key]}
    found = _VAE_BLOCK.match(key)
    if not found:
        return {VAE_PREFIX + k for k in _spellings(key, _VAE_RENAMES)}
    side, _, rest = found.groups()
    kind = "up_blocks" if side == "decoder" else "down_blocks"
    return {f"{VAE_PREFIX}{side}.{kind}.{index}.{tail}"
            for index in range(_MAX_ORIGINAL_BLOCKS) for tail in _spellings(rest, _VAE_RENAMES)}


def invert_keys(state: Mapping[str, torch.Tensor], candidates: Callable[[str], set[str]],
                convert: Callable[..., dict], markers: Mapping[str, str] | None = None,
                renames: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """Map each diffusers key of ``state`` to an original key ``convert`` turns back into it."""
    markers = dict(markers or {})
    pool = sorted(set().union(*(candidates(k) for k in state)),
                  key=lambda key: (sum(old in key for _, old in renames), key))
    probe = {orig: torch.full(state[markers[orig]].shape if orig in markers else (1,), float(i))
             for i, orig in enumerate(pool)}
    converted = convert(checkpoint=probe, config=None)
    missing = [key for key in state if key not in converted]
    if missing:
        raise WeightsLoadError(
            f"no original LTX key converts to {len(missing)} diffusers keys (first: "
            f"{missing[:5]}); this component's layout is not one diffusers' LTX single-file "
            "converter understands.")
    return {key: pool[int(converted[key].flatten()[0].item())] for key in state}


def original_layout(transformer: torch.nn.Module, vae: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The transformer and VAE state dicts under their original single-file keys."""
    out: dict[str, torch.Tensor] = {}
    parts = ((transformer, _transformer_candidates, convert_ltx_transformer_checkpoint_to_diffusers,
              {}, _TRANSFORMER_RENAMES),
             (vae, _vae_candidates, convert_ltx_vae_checkpoint_to_diffusers,
              {"vae.encoder.conv_out.conv.weight": "encoder.conv_out.conv.weight"}, _VAE_RENAMES))
    for module, candidates, convert, markers, renames in parts:
        state = module.state_dict()
        mapping = invert_keys(state, candidates, convert, markers, renames)
        original = {mapping[k]: v.detach().to("cpu").contiguous() for k, v in state.items()}
        back = convert(checkpoint=dict(original), config=None)
        wrong = sorted(k for k in state if k not in back or not torch.equal(back[k], state[k]))
        extra = sorted(set(back) - set(state))
        if wrong or extra:
            raise WeightsLoadError(
                f"the original-layout LTX keys do not convert back exactly: {len(wrong)} keys "
                f"differ (first: {wrong[:5]}), {len(extra)} unexpected (first: {extra[:5]}).")
        out.update(original)
    return out


def save_ltx_single_file(pipe: Any, path: Path) -> Path:
    """Write ``pipe.transformer`` and ``pipe.vae`` as one original-layout safetensors file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(original_layout(pipe.transformer, pipe.vae), str(path))
    return path
