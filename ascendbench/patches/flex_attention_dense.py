"""The ``flex_attention_dense`` patch: flex attention as dense SDPA (Ascend NPUs lack Triton)."""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from typing import Any, Callable, Hashable, Mapping, NamedTuple, Sequence

import torch
import torch.nn.functional as F

from ascendbench.errors import PatchError
from ascendbench.patches.registry import Check, Patch, register_patch

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Any]
KINDS = ("attention", "block_mask")
_MISSING = object()


class MaskGrid(NamedTuple):
    """The token grid a mask is evaluated on: batch, heads, query and key lengths, the device."""

    batch: int
    heads: int
    q_len: int
    kv_len: int
    device: torch.device | str = "cpu"

    def indices(self) -> tuple[torch.Tensor, ...]:
        """Index tensors ``b [B,1,1,1]``, ``h [1,H,1,1]``, ``q [1,1,M,1]``, ``kv [1,1,1,N]``."""
        arange = functools.partial(torch.arange, device=self.device)
        return (arange(self.batch).view(-1, 1, 1, 1), arange(self.heads).view(1, -1, 1, 1),
                arange(self.q_len).view(1, 1, -1, 1), arange(self.kv_len).view(1, 1, 1, -1))


def _flex() -> Any:
    return importlib.import_module("torch.nn.attention.flex_attention")  # torch >= 2.5 only


def evaluate_mask_mod(mask_mod: MaskMod, grid: MaskGrid) -> torch.Tensor:
    """The token-level boolean mask of ``mask_mod``, broadcastable to ``[B, H, M, N]``.
    >>> evaluate_mask_mod(lambda b, h, q, kv: q >= kv, MaskGrid(2, 4, 3, 3, "cpu")).int()[0, 0]
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)"""
    sizes = grid[:4]
    try:
        mask = torch.as_tensor(mask_mod(*grid.indices()), device=grid.device)
        mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        torch.broadcast_shapes(mask.shape, sizes)
    except (RuntimeError, TypeError, IndexError):
        mask = _flex().create_mask(mask_mod, *sizes, device=grid.device)
    return mask.to(torch.bool)


def _blocks_to_tokens(num_blocks: torch.Tensor, indices: torch.Tensor, block: tuple[int, int],
                      grid: MaskGrid) -> torch.Tensor:
    """Token-level mask ``[B, H, M, N]`` of the kv blocks listed by ``(num_blocks, indices)``."""
    num_blocks, indices = num_blocks.to(grid.device), indices.to(grid.device).long()
    count = max(math.ceil(grid.kv_len / block[1]), int(indices.max()) + 1 if indices.numel() else 0)
    listed = torch.arange(indices.shape[-1], device=grid.device) < num_blocks.unsqueeze(-1)
    dense = torch.zeros(*indices.shape[:-1], count + 1, dtype=torch.bool, device=grid.device)
    dense.scatter_(-1, torch.where(listed, indices, count), True)
    dense = dense[..., :count].repeat_interleave(block[0], dim=-2)[..., :grid.q_len, :]
    return dense.repeat_interleave(block[1], dim=-1)[..., :grid.kv_len]


def block_mask_to_dense(block_mask: Any, grid: MaskGrid) -> torch.Tensor:
    """Token mask of a ``BlockMask``: partial blocks keep ``mask_mod``, full kept, others masked."""
    size = block_mask.BLOCK_SIZE
    size = (size, size) if isinstance(size, int) else tuple(size)
    dense = _blocks_to_tokens(block_mask.kv_num_blocks, block_mask.kv_indices, size, grid)
    dense = dense & evaluate_mask_mod(block_mask.mask_mod, grid)
    if block_mask.full_kv_num_blocks is not None:
        dense = dense | _blocks_to_tokens(block_mask.full_kv_num_blocks,
                                          block_mask.full_kv_indices, size, grid)
    return dense


class DenseBlockMask:
    """``create_block_mask``'s result: a ``mask_mod`` made dense when attention needs it, reused."""

    def __init__(self, mask_mod: MaskMod, B: int | None, H: int | None, q_len: int, kv_len: int,
                 device: torch.device | str | None = None) -> None:
        self.mask_mod, self.B, self.H = mask_mod, B, H
        self.seq_lengths = (int(q_len), int(kv_len))
        self.device = torch.device(device if device is not None else "cpu")
        self._cache: dict[Hashable, tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(B, H, Q_LEN, KV_LEN)`` with 1 for broadcast dimensions, as ``BlockMask.shape``."""
        return (self.B or 1, self.H or 1, *self.seq_lengths)

    def to(self, device: torch.device | str) -> DenseBlockMask:
        """The same mask materialised on ``device`` (``BlockMask.to`` counterpart)."""
        return DenseBlockMask(self.mask_mod, self.B, self.H, *self.seq_lengths, device=device)

    def masks(self, grid: MaskGrid) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mask, rows)``: the boolean mask and which query rows attend to at least one key."""
        key = (*grid[:4], str(grid.device))
        if key not in self._cache:
            mask = evaluate_mask_mod(self.mask_mod, grid)
            self._cache[key] = (mask, mask.any(dim=-1, keepdim=True))
        return self._cache[key]

    def __repr__(self) -> str:
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return f"DenseBlockMask(shape={self.shape}, mask_mod={name!r})"


def dense_create_block_mask(mask_mod: MaskMod, *args: Any, **kwargs: Any) -> DenseBlockMask:
    """Drop-in for ``create_block_mask`` (torch's signature): a :class:`DenseBlockMask`."""
    bound = inspect.signature(_flex().create_block_mask).bind(mask_mod, *args, **kwargs).arguments
    return DenseBlockMask(mask_mod, bound["B"], bound["H"], bound["Q_LEN"], bound["KV_LEN"],
                          device=bound.get("device"))


class _CachingBlockMaskFactory:
    """``create_block_mask`` replacement reusing one :class:`DenseBlockMask` per mask and size."""

    def __init__(self) -> None:
        self.cache: dict[tuple, DenseBlockMask] = {}

    def __call__(self, mask_mod: MaskMod, *args: Any, **kwargs: Any) -> DenseBlockMask:
        mask = dense_create_block_mask(mask_mod, *args, **kwargs)
        try:
            return self.cache.setdefault((mask_mod, mask.B, mask.H, *mask.seq_lengths,
                                          str(mask.device)), mask)
        except TypeError:  # an unhashable mask_mod: no caching
            return mask


def dense_flex_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         *args: Any, **kwargs: Any) -> Any:
    """Drop-in for ``flex_attention`` with dense operators (``kernel_options`` ignored)."""
    flex = _flex()
    bound = inspect.signature(flex.flex_attention).bind(query, key, value, *args, **kwargs)
    bound.apply_defaults()
    options = bound.arguments
    batch, heads, q_len, head_dim = query.shape
    scale = 1.0 / math.sqrt(head_dim) if options["scale"] is None else float(options["scale"])
    block_mask, aux = options["block_mask"], options.get("return_aux")
    grid = MaskGrid(batch, heads, q_len, key.shape[-2], query.device)
    mask = rows = None
    if isinstance(block_mask, DenseBlockMask):
        mask, rows = block_mask.masks(grid)
    elif block_mask is not None:
        mask = block_mask_to_dense(block_mask, grid)
        rows = mask.any(dim=-1, keepdim=True)
    if options["score_mod"] is None and not options.get("return_lse") and aux is None:
        gqa = {"enable_gqa": True} if options["enable_gqa"] else {}
        if mask is None:
            return F.scaled_dot_product_attention(query, key, value, scale=scale, **gqa)
        # Fully masked rows attend everywhere here (no NaN) and are zeroed afterwards, as in flex.
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask | ~rows,
                                             scale=scale, **gqa)
        return out.masked_fill(~rows, 0.0)
    working = torch.float64 if query.dtype == torch.float64 else torch.float32
    if options["enable_gqa"] and key.shape[1] != query.shape[1]:
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = (query.to(working) @ key.to(working).transpose(-2, -1)) * scale
    if options["score_mod"] is not None:
        indices = MaskGrid(*scores.shape, scores.device).indices()
        scores = options["score_mod"](scores, *indices).to(working)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = scores.logsumexp(dim=-1)
    attends = torch.isfinite(lse).unsqueeze(-1)
    probs = torch.where(attends, torch.exp(scores - lse.unsqueeze(-1)), 0.0)
    out = probs.to(query.dtype) @ value.to(query.dtype)
    if aux is not None:
        return out, flex.AuxOutput(lse=lse if aux.lse else None,
                                   max_scores=scores.max(dim=-1).values if aux.max_scores else None)
    return (out, lse) if options.get("return_lse") else out


def _resolve(path: str) -> tuple[Any, str] | None:
    module_name, _, attr = path.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except (ImportError, ValueError):
        return None
    return (owner, attr) if hasattr(owner, attr) else None


def _flex_available(patch: FlexAttentionDense, target: Any) -> str | None:
    try:
        _flex()
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.flex_attention (torch >= 2.5)"
    return None


def _functions_resolve(patch: FlexAttentionDense, target: Any) -> str | None:
    bad = [path for path in patch.functions if _resolve(path) is None]
    return f"cannot import {', '.join(bad)} (options `functions`)" if bad else None


def _targets_found(patch: FlexAttentionDense, target: Any) -> str | None:
    if patch.find_targets(target) or patch.functions:
        return None
    classes = f" among classes {list(patch.module_classes)}" if patch.module_classes else ""
    return (f"no submodule of {type(target).__name__} has an instance attribute named "
            f"{list(patch.attention_attrs) + list(patch.block_mask_attrs)}{classes}; set the patch "
            "options attention_attrs / block_mask_attrs / module_classes / functions to where the "
            "model keeps its flex_attention and create_block_mask callables")


@register_patch(
    "flex_attention_dense",
    checks=(Check("torch_flex_attention", _flex_available),
            Check("functions_importable", _functions_resolve),
            Check("targets_found", _targets_found)),
    install_hint="flex_attention needs torch>=2.5 (`pip install -U torch`, or the torch build that "
                 "matches torch_npu on Ascend); the patch options say where the model keeps its "
                 "callables.",
)
class FlexAttentionDense(Patch):
    """Replace flex_attention / create_block_mask (attributes, dotted ``functions``) by dense."""

    def __init__(self, attention_attrs: Sequence[str] = ("flex_attention",),
                 block_mask_attrs: Sequence[str] = ("create_block_mask",),
                 module_classes: Sequence[str] | None = None,
                 functions: Mapping[str, str] | None = None) -> None:
        self.attention_attrs = tuple(attention_attrs or ())
        self.block_mask_attrs = tuple(block_mask_attrs or ())
        self.module_classes = tuple(module_classes) if module_classes else None
        self.functions = dict(functions or {})
        bad = {path: kind for path, kind in self.functions.items() if kind not in KINDS}
        if bad:
            raise PatchError(f"patch 'flex_attention_dense' option functions={bad}: each value "
                             f"must be one of {', '.join(KINDS)} (what the callable is).")
        self._saved: list[tuple[Any, str, Any]] = []

    def find_targets(self, target: Any) -> list[tuple[Any, str, str]]:
        """``(owner module, attribute, kind)`` for every instance attribute to replace."""
        found = []
        for module in target.modules() if isinstance(target, torch.nn.Module) else ():
            if self.module_classes and type(module).__name__ not in self.module_classes:
                continue
            for attrs, kind in ((self.attention_attrs, "attention"),
                                (self.block_mask_attrs, "block_mask")):
                found += [(module, attr, kind) for attr in attrs
                          if callable(module.__dict__.get(attr))
                          and not isinstance(module.__dict__[attr], torch.nn.Module)]
        return found

    def apply(self, target: Any) -> dict[str, Any]:
        """Swap in the dense callables; return the counts and the patched classes and functions."""
        replacement = {"attention": dense_flex_attention, "block_mask": _CachingBlockMaskFactory()}
        targets = self.find_targets(target)
        functions = [(*_resolve(path), kind) for path, kind in self.functions.items()]
        for owner, attr, kind in targets + functions:
            self._saved.append((owner, attr, vars(owner).get(attr, _MISSING)))
            setattr(owner, attr, replacement[kind])
        return {"targets": {kind: sum(k == kind for *_, k in targets) for kind in KINDS},
                "classes": sorted({type(owner).__name__ for owner, _, _ in targets}),
                "functions": dict(self.functions)}

    def restore(self) -> None:
        """Put every original callable back (an attribute that was not there is removed)."""
        while self._saved:
            owner, attr, old = self._saved.pop()
            if old is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, old)
