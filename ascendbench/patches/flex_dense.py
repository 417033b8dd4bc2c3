"""``flex_attention`` as dense-mask ``scaled_dot_product_attention``: the math of the patch.

``torch.nn.attention.flex_attention`` with a ``BlockMask`` from ``create_block_mask`` is compiled by
inductor into Triton kernels, which Ascend NPUs lack. The functions here compute the same attention
with plain operators:

* the token-level mask is materialised by evaluating the mask's ``mask_mod(b, h, q_idx, kv_idx)`` on
  broadcast index grids (``BlockMask.to_dense()`` is only block-level); for a real ``BlockMask`` the
  result is intersected with its block structure, as the compiled kernels do (full blocks are kept
  whole, partial blocks get the ``mask_mod``, absent blocks are masked);
* rows whose every key is masked give zeros (and ``-inf`` log-sum-exp), as flex does, where plain
  SDPA would give NaN;
* without a ``score_mod`` the attention is one ``F.scaled_dot_product_attention`` call with a boolean
  mask; a ``score_mod`` (or a request for the log-sum-exp / max scores) takes an explicit softmax path
  in float32 (float64 for float64 inputs), the working precision of flex's own eager implementation.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, Callable, Hashable, Mapping, NamedTuple, Sequence

import torch
import torch.nn.functional as F

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Any]


class MaskGrid(NamedTuple):
    """The token grid a mask is evaluated on: batch, heads, query and key lengths, and the device."""

    batch: int
    heads: int
    q_len: int
    kv_len: int
    device: torch.device | str = "cpu"

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """``(B, H, M, N)``."""
        return (self.batch, self.heads, self.q_len, self.kv_len)


def index_grids(grid: MaskGrid) -> tuple[torch.Tensor, ...]:
    """Index tensors ``b [B,1,1,1]``, ``h [1,H,1,1]``, ``q [1,1,M,1]``, ``kv [1,1,1,N]``."""
    arange = lambda n: torch.arange(n, device=grid.device)  # noqa: E731
    return (arange(grid.batch).view(-1, 1, 1, 1), arange(grid.heads).view(1, -1, 1, 1),
            arange(grid.q_len).view(1, 1, -1, 1), arange(grid.kv_len).view(1, 1, 1, -1))


def evaluate_mask_mod(mask_mod: MaskMod, grid: MaskGrid) -> torch.Tensor:
    """The token-level boolean mask of ``mask_mod``, 4-D and broadcastable to ``[B, H, M, N]``.

    The mask_mod is called once on broadcast index grids, so a mask that ignores ``b`` and ``h``
    stays ``[1, 1, M, N]``. A mask_mod that cannot take grids (Python control flow on the indices)
    falls back to torch's own vmap-based ``create_mask``.

    >>> evaluate_mask_mod(lambda b, h, q, kv: q >= kv, MaskGrid(2, 4, 3, 3, "cpu")).int()[0, 0]
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    target = grid.sizes
    try:
        mask = torch.as_tensor(mask_mod(*index_grids(grid)), device=grid.device)
        while mask.dim() < 4:
            mask = mask.unsqueeze(0)
        torch.broadcast_shapes(mask.shape, target)
    except (RuntimeError, TypeError, IndexError):
        from torch.nn.attention.flex_attention import create_mask

        mask = create_mask(mask_mod, *grid.sizes, device=grid.device)
    return mask.to(torch.bool)


def _blocks_to_tokens(num_blocks: torch.Tensor, indices: torch.Tensor, block_size: tuple[int, int],
                      grid: MaskGrid) -> torch.Tensor:
    """Token-level mask ``[B, H, M, N]`` of the kv blocks listed by ``(num_blocks, indices)``."""
    q_len, kv_len, device = grid.q_len, grid.kv_len, grid.device
    num_blocks, indices = num_blocks.to(device), indices.to(device).long()
    kv_blocks = max(math.ceil(kv_len / block_size[1]), int(indices.max()) + 1 if indices.numel() else 0)
    listed = torch.arange(indices.shape[-1], device=device) < num_blocks.unsqueeze(-1)
    dense = torch.zeros(*indices.shape[:-1], kv_blocks + 1, dtype=torch.bool, device=device)
    dense.scatter_(-1, torch.where(listed, indices, kv_blocks), True)
    dense = dense[..., :kv_blocks]
    dense = dense.repeat_interleave(block_size[0], dim=-2)[..., :q_len, :]
    return dense.repeat_interleave(block_size[1], dim=-1)[..., :kv_len]


def block_mask_to_dense(block_mask: Any, grid: MaskGrid) -> torch.Tensor:
    """Token-level boolean mask of a ``torch.nn.attention.flex_attention.BlockMask``.

    Partial blocks keep the ``mask_mod``, full blocks are kept whole, other blocks are masked: the
    semantics of the compiled flex kernels.
    """
    size = block_mask.BLOCK_SIZE
    size = (size, size) if isinstance(size, int) else tuple(size)
    token = evaluate_mask_mod(block_mask.mask_mod, grid)
    dense = _blocks_to_tokens(block_mask.kv_num_blocks, block_mask.kv_indices, size, grid) & token
    if block_mask.full_kv_num_blocks is not None:
        dense = dense | _blocks_to_tokens(block_mask.full_kv_num_blocks, block_mask.full_kv_indices, size, grid)
    return dense


class DenseBlockMask:
    """What the patched ``create_block_mask`` returns: a ``mask_mod`` and its dense masks, cached.

    The mask is evaluated when attention first needs it, for that call's batch, heads, lengths and
    device (as flex evaluates ``mask_mod`` with the query's real ``b`` and ``h``), then reused by
    every layer that gets the same mask.

    Args:
        mask_mod: ``mask_mod(b, h, q_idx, kv_idx) -> bool``, as for ``create_block_mask``.
        B, H: batch and head sizes given to ``create_block_mask`` (``None``: broadcast).
        q_len, kv_len: the sequence lengths.
        device: where the mask is materialised by default.
    """

    def __init__(self, mask_mod: MaskMod, B: int | None, H: int | None, q_len: int, kv_len: int,
                 device: torch.device | str | None = None) -> None:
        self.mask_mod = mask_mod
        self.B, self.H = B, H
        self.seq_lengths = (int(q_len), int(kv_len))
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self._cache: dict[Hashable, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def for_request(cls, mask_mod: MaskMod, request: BlockMaskRequest) -> "DenseBlockMask":
        """The mask of ``create_block_mask(mask_mod, ...)`` bound to ``request``."""
        return cls(mask_mod, request.B, request.H, request.Q_LEN, request.KV_LEN, device=request.device)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(B, H, Q_LEN, KV_LEN)`` with 1 for broadcast dimensions, as ``BlockMask.shape``."""
        return (self.B or 1, self.H or 1, *self.seq_lengths)

    def to(self, device: torch.device | str) -> "DenseBlockMask":
        """The same mask materialised on ``device`` (``BlockMask.to`` counterpart)."""
        return DenseBlockMask(self.mask_mod, self.B, self.H, *self.seq_lengths, device=device)

    def masks(self, grid: MaskGrid) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mask, rows)``: the boolean mask and which query rows attend to at least one key."""
        key = (*grid.sizes, str(grid.device))
        if key not in self._cache:
            mask = evaluate_mask_mod(self.mask_mod, grid)
            self._cache[key] = (mask, mask.any(dim=-1, keepdim=True))
        return self._cache[key]

    def __repr__(self) -> str:
        return f"DenseBlockMask(shape={self.shape}, mask_mod={getattr(self.mask_mod, '__name__', self.mask_mod)!r})"


@dataclass(frozen=True)
class BlockMaskRequest:
    """The arguments of one ``create_block_mask`` call after ``mask_mod``, in torch's order.

    Binding a call with ``BlockMaskRequest.bind(args, kwargs)`` accepts every call form of the
    original (positional or by name); arguments torch added later (``separate_full_blocks``...) concern
    the compiled kernels and are ignored.
    """

    B: int | None
    H: int | None
    Q_LEN: int
    KV_LEN: int
    device: torch.device | str | None = None
    BLOCK_SIZE: Any = 128
    _compile: bool = False

    @classmethod
    def bind(cls, args: Sequence[Any], kwargs: Mapping[str, Any]) -> "BlockMaskRequest":
        """The request of ``create_block_mask(mask_mod, *args, **kwargs)``."""
        known = [f.name for f in fields(cls)]
        return cls(*args[:len(known)], **{k: v for k, v in kwargs.items() if k in known})


def dense_create_block_mask(mask_mod: MaskMod, *args: Any, **kwargs: Any) -> DenseBlockMask:
    """Drop-in for ``create_block_mask`` (same call forms): a :class:`DenseBlockMask`, no compile.

    A drop-in must accept whatever its callers pass to the original, so the arguments after
    ``mask_mod`` are bound once to a :class:`BlockMaskRequest` rather than listed here.
    """
    return DenseBlockMask.for_request(mask_mod, BlockMaskRequest.bind(args, kwargs))


@dataclass(frozen=True)
class FlexOptions:
    """The arguments of one ``flex_attention`` call after ``query, key, value``, in torch's order.

    ``FlexOptions(*args, **kwargs)`` binds a call exactly as ``flex_attention`` does (``return_aux`` is
    keyword-only there and here).

    Attributes:
        score_mod: ``score_mod(score, b, h, q_idx, kv_idx)``, evaluated on broadcast grids.
        block_mask: a ``BlockMask``, a :class:`DenseBlockMask` or ``None`` (no mask).
        scale: the softmax scale (default ``1 / sqrt(D)``).
        enable_gqa: grouped-query attention (``H`` a multiple of ``Hkv``).
        return_lse: also return the natural-log log-sum-exp ``[B, H, M]`` (deprecated in torch).
        kernel_options: accepted and ignored (kernel tuning of the compiled path).
        return_aux: an ``AuxRequest(lse=..., max_scores=...)``: also return an ``AuxOutput``.
    """

    score_mod: Callable | None = None
    block_mask: Any = None
    scale: float | None = None
    enable_gqa: bool = False
    return_lse: bool = False
    kernel_options: Any = None
    _: KW_ONLY
    return_aux: Any = None

    def softmax_scale(self, head_dim: int) -> float:
        """``scale``, or ``1 / sqrt(head_dim)`` when it is not set."""
        return 1.0 / math.sqrt(head_dim) if self.scale is None else float(self.scale)


def _mask_and_rows(block_mask: Any, grid: MaskGrid) -> tuple[torch.Tensor, torch.Tensor] | None:
    if block_mask is None:
        return None
    if isinstance(block_mask, DenseBlockMask):
        return block_mask.masks(grid)
    mask = block_mask_to_dense(block_mask, grid)
    return mask, mask.any(dim=-1, keepdim=True)


def dense_flex_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         *args: Any, **kwargs: Any) -> torch.Tensor | tuple[torch.Tensor, Any]:
    """Drop-in for ``flex_attention`` (same arguments) computed with dense operators.

    A drop-in must accept every call form of the original, so the arguments after the three tensors
    are bound once to :class:`FlexOptions` (see there for each of them) rather than listed here.

    Args:
        query, key, value: ``[B, H, M, D]``, ``[B, Hkv, N, D]``, ``[B, Hkv, N, Dv]``.
        *args, **kwargs: ``score_mod, block_mask, scale, enable_gqa, return_lse, kernel_options`` and
            the keyword-only ``return_aux``, as for ``flex_attention``.

    Returns:
        The attention output ``[B, H, M, Dv]`` in the query dtype, and the log-sum-exp or the
        ``AuxOutput`` when asked.
    """
    options = FlexOptions(*args, **kwargs)
    batch, heads, q_len, _ = query.shape
    masks = _mask_and_rows(options.block_mask, MaskGrid(batch, heads, q_len, key.shape[-2], query.device))
    if options.score_mod is None and not options.return_lse and options.return_aux is None:
        return _sdpa(query, key, value, masks, options)
    out, lse, max_scores = _explicit(query, key, value, masks, options)
    if options.return_aux is not None:
        from torch.nn.attention.flex_attention import AuxOutput

        return out, AuxOutput(lse=lse if options.return_aux.lse else None,
                              max_scores=max_scores if options.return_aux.max_scores else None)
    return (out, lse) if options.return_lse else out


def _sdpa(query, key, value, masks, options):
    scale = options.softmax_scale(query.shape[-1])
    extra = {"enable_gqa": True} if options.enable_gqa else {}
    if masks is None:
        return F.scaled_dot_product_attention(query, key, value, scale=scale, **extra)
    mask, rows = masks
    # Fully masked rows attend everywhere here (no NaN) and are zeroed afterwards, as in flex.
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask | ~rows, scale=scale, **extra)
    return out.masked_fill(~rows, 0.0)


def _explicit(query, key, value, masks, options):
    working = torch.float64 if query.dtype == torch.float64 else torch.float32
    if options.enable_gqa and key.shape[1] != query.shape[1]:
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = (query.to(working) @ key.to(working).transpose(-2, -1)) * options.softmax_scale(query.shape[-1])
    if options.score_mod is not None:
        scores = options.score_mod(scores, *index_grids(MaskGrid(*scores.shape, scores.device))).to(working)
    if masks is not None:
        scores = scores.masked_fill(~masks[0], float("-inf"))
    lse = scores.logsumexp(dim=-1)
    attends = torch.isfinite(lse).unsqueeze(-1)
    probs = torch.where(attends, torch.exp(scores - lse.unsqueeze(-1)), 0.0)
    out = probs.to(query.dtype) @ value.to(query.dtype)
    return out, lse, scores.max(dim=-1).values
