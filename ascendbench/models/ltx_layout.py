"""Write a diffusers LTX-Video pipeline as one single-file checkpoint in Lightricks' original layout.

LTX-Video checkpoints ship as one ``.safetensors`` file in the original (non-diffusers) key layout --
transformer under ``model.diffusion_model.``, VAE under ``vae.`` with its own block numbering -- and
are loaded with ``LTXPipeline.from_single_file``. To exercise that exact path offline, the tiny twin
is written in the same layout by :func:`save_ltx_single_file`.

The key map is not written out by hand: it is found by inverting diffusers' own converters
(``convert_ltx_transformer_checkpoint_to_diffusers``, ``convert_ltx_vae_checkpoint_to_diffusers``).
For every diffusers key, candidate original keys are generated (block renumberings and the inverse
of each rename), all candidates are pushed through the converter at once with distinct tag values,
and the candidate whose tag lands on the diffusers key is kept. The finished file is converted back
with the same converters and must reproduce every tensor exactly, or :class:`WeightsLoadError` says
which keys did not.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping

import torch

from ascendbench.errors import WeightsLoadError

TRANSFORMER_PREFIX = "model.diffusion_model."
VAE_PREFIX = "vae."
# Inverse renames: (diffusers spelling, original spelling); each may or may not apply to a key.
_TRANSFORMER_RENAMES = (("proj_in", "patchify_proj"), ("time_embed", "adaln_single"),
                        ("norm_q", "q_norm"), ("norm_k", "k_norm"))
_VAE_RENAMES = (("resnets", "res_blocks"), ("conv_shortcut.conv", "conv_shortcut"), ("norm3", "norm3.norm"),
                ("time_embedder", "last_time_embedder"), ("scale_shift_table", "last_scale_shift_table"))
_VAE_SPECIAL = {"latents_mean": "per_channel_statistics.mean-of-means",
                "latents_std": "per_channel_statistics.std-of-means"}
_VAE_BLOCK = re.compile(r"^(encoder|decoder)\.(mid_block|(?:up|down)_blocks\.\d+"
                        r"(?:\.(?:upsamplers\.0|downsamplers\.0|conv_in|conv_out))?)\.(.+)$")
_MAX_ORIGINAL_BLOCKS = 12


def _spellings(key: str, renames: Iterable[tuple[str, str]]) -> set[str]:
    """``key`` with every subset of the applicable inverse renames applied."""
    applicable = [(new, old) for new, old in renames if new in key]
    out = set()
    for mask in itertools.product((False, True), repeat=len(applicable)):
        spelled = key
        for use, (new, old) in zip(mask, applicable, strict=True):
            if use:
                spelled = spelled.replace(new, old)
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
                convert: Callable[..., dict], markers: Mapping[str, str] = (),
                prefer: Callable[[str], int] = lambda key: 0) -> dict[str, str]:
    """Map each diffusers key of ``state`` to an original key that ``convert`` turns back into it.

    Args:
        state: the diffusers state dict (its shapes feed the converters' version checks).
        candidates: diffusers key -> plausible original keys.
        convert: diffusers' converter (``checkpoint=`` dict -> diffusers-layout dict).
        markers: original key -> diffusers key of tensors a converter inspects by shape; the probe
            tensor of such a candidate carries the real tensor's shape.
        prefer: score of a candidate; where several convert to the same key (a rename that leaves
            the diffusers spelling unchanged too), the highest score wins: converters keep the last
            key written, and candidates are written in ascending score.
    """
    pool = sorted(set().union(*(candidates(k) for k in state)), key=lambda key: (prefer(key), key))
    shapes = {orig: state[markers[orig]].shape for orig in pool if orig in markers}
    probe = {orig: torch.full(shapes.get(orig, (1,)), float(i)) for i, orig in enumerate(pool)}
    converted = convert(checkpoint=probe, config=None)
    mapping, missing = {}, []
    for key in state:
        tag = converted.get(key)
        if tag is None:
            missing.append(key)
        else:
            mapping[key] = pool[int(tag.flatten()[0].item())]
    if missing:
        raise WeightsLoadError(
            f"no original LTX key converts to {len(missing)} diffusers keys (first: {missing[:5]}); this "
            "component's layout is not one diffusers' LTX single-file converter understands."
        )
    return mapping


def original_layout(transformer: torch.nn.Module, vae: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The transformer and VAE state dicts under their original single-file keys."""
    from diffusers.loaders.single_file_utils import (
        convert_ltx_transformer_checkpoint_to_diffusers,
        convert_ltx_vae_checkpoint_to_diffusers,
    )

    out: dict[str, torch.Tensor] = {}
    parts = ((transformer.state_dict(), _transformer_candidates, convert_ltx_transformer_checkpoint_to_diffusers, {},
              _TRANSFORMER_RENAMES),
             (vae.state_dict(), _vae_candidates, convert_ltx_vae_checkpoint_to_diffusers,
              {"vae.encoder.conv_out.conv.weight": "encoder.conv_out.conv.weight"}, _VAE_RENAMES))
    for state, candidates, convert, markers, renames in parts:
        mapping = invert_keys(state, candidates, convert, markers,
                              prefer=lambda key, renames=renames: sum(old in key for _, old in renames))
        out.update({mapping[k]: v.detach().to("cpu").contiguous() for k, v in state.items()})
        _verify_roundtrip(state, {mapping[k]: v for k, v in state.items()}, convert)
    return out


def _verify_roundtrip(state: Mapping[str, torch.Tensor], original: Mapping[str, torch.Tensor], convert) -> None:
    back = convert(checkpoint=dict(original), config=None)
    wrong = sorted(k for k in state if k not in back or not torch.equal(back[k], state[k]))
    extra = sorted(set(back) - set(state))
    if wrong or extra:
        raise WeightsLoadError(
            f"the original-layout LTX keys do not convert back exactly: {len(wrong)} keys differ "
            f"(first: {wrong[:5]}), {len(extra)} unexpected (first: {extra[:5]})."
        )


def save_ltx_single_file(pipe, path: Path) -> Path:
    """Write ``pipe.transformer`` and ``pipe.vae`` as one original-layout safetensors file."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(original_layout(pipe.transformer, pipe.vae), str(path))
    return path
