"""A float64 CPU reference whose memory is bounded without changing its math.

On CPU, float64 convolutions have no oneDNN kernel: they take the im2col path, which unfolds the input
into a ``C_in/groups x kernel x output positions`` buffer (3.6 GB for one 192-channel 3x3 convolution on
a 512x512 input, 12x its output). :func:`bounded_float64` evaluates every float64 ``conv1d/2d/3d`` in
tiles of output positions, each computed from its own input window (the tile plus its halo, zero
padding added only where the window leaves the input), so that the unfolded buffer stays under
:attr:`Bounds.conv_bytes`. Each output element is still the same sum over the same window with the
same weights, so the result equals the untiled one (tests/baseline/test_bounded.py checks it on single
layers and whole decoders). ``scaled_dot_product_attention`` runs in chunks of query rows (each row's
softmax only reads its own scores) so that a score matrix stays under :attr:`Bounds.attention_bytes`.

It is a :class:`~torch.overrides.TorchFunctionMode`: diffusers' causal convolution wrappers, reflect
padding (``F.pad`` then an unpadded convolution) and the attention processors all end in these calls.
It is applied inside the reference process only (:func:`ascendbench.baseline.compute.run_reference`)
and in the memory estimate of that process (:func:`ascendbench.baseline.memory.reference_memory`, on
``meta`` tensors, where the same tiles are counted). Other dtypes pass through untouched.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_MB = 1 << 20
_CONVS: dict[Callable, int] = {torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3}
_SDPA = (F.scaled_dot_product_attention,)
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")


@dataclass(frozen=True)
class Bounds:
    """The most bytes one float64 operation may hold as its transient buffer.

    Attributes:
        conv_bytes: the im2col buffer of one convolution call (``C_in/groups x kernel x positions x 8``).
        attention_bytes: the attention scores of one call (``batch x heads x queries x keys x 8``).
    """

    conv_bytes: int = 128 * _MB
    attention_bytes: int = 128 * _MB


@dataclass
class BoundedStats:
    """What :class:`BoundedFloat64` did: calls seen and split, and the tiles they were split into."""

    convolutions: int = 0
    tiled_convolutions: int = 0
    conv_tiles: int = 0
    attentions: int = 0
    chunked_attentions: int = 0


def _tuple(value: Any, n: int) -> tuple[int, ...]:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * n


def _padding(padding: Any, kernel: Sequence[int], dilation: Sequence[int]) -> list[tuple[int, int]]:
    """Per spatial dim (before, after) zero padding, ``"same"``/``"valid"`` as torch computes them."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in _tuple(padding, len(kernel))]


@dataclass(frozen=True)
class _ConvGeometry:
    """Shape facts of one N-d convolution call (spatial dims only)."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]

    @property
    def out(self) -> tuple[int, ...]:
        """Output extent per spatial dim."""
        return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), k, d, st
                     in zip(self.size, self.pads, self.kernel, self.dilation, self.stride, strict=True))

    def window(self, dim: int, start: int, stop: int) -> tuple[int, int, int, int]:
        """Input rows ``[a, b)`` of output rows ``[start, stop)`` along ``dim``, and the zero rows before/after."""
        first = start * self.stride[dim] - self.pads[dim][0]
        last = (stop - 1) * self.stride[dim] - self.pads[dim][0] + self.dilation[dim] * (self.kernel[dim] - 1) + 1
        a, b = max(first, 0), min(last, self.size[dim])
        return a, b, a - first, last - b


def tile_shape(out: Sequence[int], positions: int) -> tuple[int, ...]:
    """Output tile extents holding at most ``positions`` positions (at least one row): trailing dims are
    kept whole while they fit, the first dim that does not fit is split, leading dims are cut to 1.

    >>> tile_shape((8, 16, 16), 600)
    (2, 16, 16)
    >>> tile_shape((8, 16, 16), 40)
    (1, 2, 16)
    """
    tile, left = [1] * len(out), max(int(positions), 1)
    for dim in reversed(range(len(out))):
        if out[dim] <= left:
            tile[dim], left = out[dim], left // out[dim]
        else:
            tile[dim] = max(left, 1)
            break
    return tuple(tile)


def _conv_call(args: tuple, kwargs: dict) -> dict[str, Any]:
    call = dict(zip(_CONV_ARGS, args, strict=False))
    call.update(kwargs)
    call.setdefault("bias", None)
    call.setdefault("stride", 1)
    call.setdefault("padding", 0)
    call.setdefault("dilation", 1)
    call.setdefault("groups", 1)
    return call


def _tiled_conv(func: Callable, call: dict[str, Any], geometry: _ConvGeometry, tile: tuple[int, ...],
                stats: BoundedStats) -> torch.Tensor:
    x, weight = call["input"], call["weight"]
    out = x.new_empty((x.shape[0], weight.shape[0], *geometry.out))
    starts = [range(0, n, t) for n, t in zip(geometry.out, tile, strict=True)]
    corners = list(itertools.product(*starts)) if not x.is_meta else _sample_corners(starts)
    for corner in corners:
        stops = [min(c + t, n) for c, t, n in zip(corner, tile, geometry.out, strict=True)]
        windows = [geometry.window(d, c, s) for d, (c, s) in enumerate(zip(corner, stops, strict=True))]
        piece = x[(..., *(slice(a, b) for a, b, _, _ in windows))]
        zeros = [n for _, _, before, after in reversed(windows) for n in (before, after)]
        if any(zeros):
            piece = F.pad(piece, zeros)
        result = func(piece, weight, call["bias"], stride=geometry.stride, padding=0, dilation=geometry.dilation,
                      groups=call["groups"])
        out[(..., *(slice(c, s) for c, s in zip(corner, stops, strict=True)))] = result
        stats.conv_tiles += 1
    if x.is_meta:
        stats.conv_tiles += math.prod(len(r) for r in starts) - len(corners)
    return out


def _sample_corners(starts: Sequence[range]) -> list[tuple[int, ...]]:
    """The tiles a memory estimate on the meta device runs: the first, an interior and the last one of each
    dim (their padding differs; every other tile allocates as one of them). Running them all would make a
    dry run at 4096^2 take minutes for nothing: meta tiles compute nothing."""
    picks = [sorted({r[0], r[len(r) // 2], r[-1]}) for r in starts]
    return list(itertools.product(*picks))


def conv_unfold_bytes(x: torch.Tensor, weight: torch.Tensor, positions: int, groups: int) -> int:
    """Bytes of the im2col buffer of a CPU convolution of ``x`` over ``positions`` output positions."""
    return x.shape[0] * (x.shape[1] // groups) * math.prod(weight.shape[2:]) * positions * x.element_size()


def bounded_conv(func: Callable, call: dict[str, Any], limit: int, stats: BoundedStats) -> torch.Tensor:
    """``func(**call)`` (a ``torch.convNd``) in output tiles whose im2col buffer stays under ``limit`` bytes."""
    x, weight = call["input"], call["weight"]
    nd = weight.dim() - 2
    batched = x.dim() == nd + 2
    x = x if batched else x.unsqueeze(0)
    kernel, dilation = tuple(weight.shape[2:]), _tuple(call["dilation"], nd)
    geometry = _ConvGeometry(tuple(x.shape[2:]), kernel, _tuple(call["stride"], nd), dilation,
                             tuple(_padding(call["padding"], kernel, dilation)))
    per_position = conv_unfold_bytes(x, weight, 1, int(call["groups"]))
    stats.convolutions += 1
    if per_position * math.prod(geometry.out) <= limit or min(geometry.out) <= 0:
        return func(**{**call, "input": call["input"]})
    stats.tiled_convolutions += 1
    out = _tiled_conv(func, {**call, "input": x}, geometry, tile_shape(geometry.out, limit // per_position), stats)
    return out if batched else out.squeeze(0)


def bounded_attention(func: Callable, call: dict[str, Any], limit: int, stats: BoundedStats) -> torch.Tensor:
    """``func(**call)`` (``scaled_dot_product_attention``) in chunks of query rows whose scores stay under
    ``limit`` bytes; causal or dropout calls (whose rows depend on their position or a random draw) run whole."""
    query, key, mask = call["query"], call["key"], call.get("attn_mask")
    rows = query.shape[-2]
    per_row = math.prod(query.shape[:-2]) * key.shape[-2] * query.element_size()
    stats.attentions += 1
    if per_row * rows <= limit or call.get("is_causal") or float(call.get("dropout_p", 0.0) or 0.0) > 0:
        return func(**call)
    stats.chunked_attentions += 1
    chunk = max(limit // per_row, 1)
    pieces = []
    if query.is_meta and chunk < rows:  # a memory estimate: the rows done, then one chunk's transient peak
        done = query.new_empty((*query.shape[:-2], rows - chunk, call["value"].shape[-1]))
        last = func(**{**call, "query": query[..., :chunk, :],
                       **({"attn_mask": mask[..., :chunk, :]} if mask is not None and mask.dim() >= 2
                          and mask.shape[-2] == rows else {})})
        return torch.cat([done, last], dim=-2)
    for start in range(0, rows, chunk):
        part = {**call, "query": query[..., start:start + chunk, :]}
        if mask is not None and mask.dim() >= 2 and mask.shape[-2] == rows:
            part["attn_mask"] = mask[..., start:start + chunk, :]
        pieces.append(func(**part))
    return torch.cat(pieces, dim=-2)


class BoundedFloat64(TorchFunctionMode):
    """Routes float64 convolutions and attention through :func:`bounded_conv` / :func:`bounded_attention`.

    Args:
        bounds: the byte limits.
    """

    def __init__(self, bounds: Bounds = Bounds()) -> None:
        super().__init__()
        self.bounds = bounds
        self.stats = BoundedStats()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CONVS and args and _is_float64(args[0]):
            return bounded_conv(func, _conv_call(args, kwargs), self.bounds.conv_bytes, self.stats)
        if func in _SDPA and args and _is_float64(args[0]):
            call = {**dict(zip(_SDPA_ARGS, args, strict=False)), **kwargs}
            return bounded_attention(func, call, self.bounds.attention_bytes, self.stats)
        return func(*args, **kwargs)


def _is_float64(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.float64


def bounded_float64(bounds: Bounds = Bounds()) -> BoundedFloat64:
    """A context manager: inside it, float64 convolutions and attention run in bounded pieces.

    >>> with bounded_float64(Bounds(conv_bytes=4096)) as mode:
    ...     y = torch.nn.functional.conv2d(torch.ones(1, 2, 8, 8, dtype=torch.float64),
    ...                                    torch.ones(1, 2, 3, 3, dtype=torch.float64), padding=1)
    >>> mode.stats.tiled_convolutions, float(y[0, 0, 0, 0]), float(y[0, 0, 4, 4])
    (1, 8.0, 18.0)
    """
    return BoundedFloat64(bounds)
