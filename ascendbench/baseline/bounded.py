"""A float64 CPU reference in bounded memory, same math: tiled convolutions, chunked attention."""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_MB = 1 << 20
_CONVS = (torch.conv1d, torch.conv2d, torch.conv3d)
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


@dataclass(frozen=True)
class Bounds:
    """The most bytes one float64 call may hold: its im2col buffer, its attention scores."""

    conv_bytes: int = 128 * _MB
    attention_bytes: int = 128 * _MB


@dataclass
class BoundedStats:
    """Calls seen and split, and the tiles they were split into."""

    convolutions: int = 0
    tiled_convolutions: int = 0
    conv_tiles: int = 0
    attentions: int = 0
    chunked_attentions: int = 0


def _tuple(value: Any, n: int) -> tuple[int, ...]:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * n


def _padding(padding: Any, kernel: Sequence[int], dilation: Sequence[int]) -> list[tuple[int, int]]:
    """Per spatial dim (before, after) zero padding, ``"same"``/``"valid"`` as torch has them."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in _tuple(padding, len(kernel))]


@dataclass(frozen=True)
class _ConvGeometry:
    size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]

    @property
    def out(self) -> tuple[int, ...]:
        """Output extent per spatial dim."""
        dims = zip(self.size, self.pads, self.kernel, self.dilation, self.stride, strict=True)
        return tuple((s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), k, d, st in dims)

    def window(self, dim: int, start: int, stop: int) -> tuple[int, int, int, int]:
        """Input rows ``[a, b)`` of output rows ``[start, stop)`` and the zero rows before/after."""
        first = start * self.stride[dim] - self.pads[dim][0]
        last = (stop - 1) * self.stride[dim] - self.pads[dim][0]
        last += self.dilation[dim] * (self.kernel[dim] - 1) + 1
        a, b = max(first, 0), min(last, self.size[dim])
        return a, b, a - first, last - b


def tile_shape(out: Sequence[int], positions: int) -> tuple[int, ...]:
    """Output tile extents of at most ``positions``: trailing dims whole, one split, rest 1."""
    tile, left = [1] * len(out), max(int(positions), 1)
    for dim in reversed(range(len(out))):
        if out[dim] > left:
            tile[dim] = max(left, 1)
            break
        tile[dim], left = out[dim], left // out[dim]
    return tuple(tile)


def _tiled_conv(func: Callable, call: dict[str, Any], geometry: _ConvGeometry,
                tile: tuple[int, ...], stats: BoundedStats) -> torch.Tensor:
    x, weight = call["input"], call["weight"]
    out = x.new_empty((x.shape[0], weight.shape[0], *geometry.out))
    starts = [range(0, n, t) for n, t in zip(geometry.out, tile, strict=True)]
    # every tile; on meta tensors (an estimate) the first, an interior and the last per dim
    spots = [sorted({r[0], r[len(r) // 2], r[-1]}) for r in starts] if x.is_meta else starts
    for corner in itertools.product(*spots):
        stops = [min(c + t, n) for c, t, n in zip(corner, tile, geometry.out, strict=True)]
        windows = [geometry.window(d, c, s)
                   for d, (c, s) in enumerate(zip(corner, stops, strict=True))]
        piece = x[(..., *(slice(a, b) for a, b, _, _ in windows))]
        zeros = [n for _, _, before, after in reversed(windows) for n in (before, after)]
        if any(zeros):
            piece = F.pad(piece, zeros)
        result = func(piece, weight, call["bias"], stride=geometry.stride, padding=0,
                      dilation=geometry.dilation, groups=call["groups"])
        out[(..., *(slice(c, s) for c, s in zip(corner, stops, strict=True)))] = result
    stats.conv_tiles += math.prod(len(r) for r in starts)
    return out


def conv_unfold_bytes(x: torch.Tensor, weight: torch.Tensor, positions: int, groups: int) -> int:
    """Bytes of the im2col buffer of a CPU convolution of ``x`` over ``positions`` positions."""
    per_position = x.shape[0] * (x.shape[1] // groups) * math.prod(weight.shape[2:])
    return per_position * positions * x.element_size()


def _bounded_conv(func: Callable, call: dict[str, Any], limit: int,
                  stats: BoundedStats) -> torch.Tensor:
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
        return func(**call)
    stats.tiled_convolutions += 1
    tile = tile_shape(geometry.out, limit // per_position)
    out = _tiled_conv(func, {**call, "input": x}, geometry, tile, stats)
    return out if batched else out.squeeze(0)


def _bounded_attention(func: Callable, call: dict[str, Any], limit: int,
                       stats: BoundedStats) -> torch.Tensor:
    """Causal or dropout calls (whose rows depend on position or a draw) run whole."""
    query, key, mask = call["query"], call["key"], call.get("attn_mask")
    rows = query.shape[-2]
    per_row = math.prod(query.shape[:-2]) * key.shape[-2] * query.element_size()
    stats.attentions += 1
    if per_row * rows <= limit or call.get("is_causal") or float(call.get("dropout_p") or 0.0) > 0:
        return func(**call)
    stats.chunked_attentions += 1
    chunk = max(limit // per_row, 1)
    per_query_mask = mask is not None and mask.dim() >= 2 and mask.shape[-2] == rows

    def part(start: int) -> torch.Tensor:
        piece = {**call, "query": query[..., start:start + chunk, :]}
        if per_query_mask:
            piece["attn_mask"] = mask[..., start:start + chunk, :]
        return func(**piece)

    if query.is_meta and chunk < rows:  # an estimate: the rows done, one chunk's transient peak
        done = query.new_empty((*query.shape[:-2], rows - chunk, call["value"].shape[-1]))
        return torch.cat([done, part(0)], dim=-2)
    return torch.cat([part(start) for start in range(0, rows, chunk)], dim=-2)


class BoundedFloat64(TorchFunctionMode):
    """Inside it, float64 convolutions and attention run in bounded pieces."""

    def __init__(self, bounds: Bounds = Bounds()) -> None:
        super().__init__()
        self.bounds = bounds
        self.stats = BoundedStats()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        f64 = bool(args) and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64
        if func in _CONVS and f64:
            call = {**_CONV_DEFAULTS, **dict(zip(_CONV_ARGS, args, strict=False)), **kwargs}
            return _bounded_conv(func, call, self.bounds.conv_bytes, self.stats)
        if func is F.scaled_dot_product_attention and f64:
            call = {**dict(zip(_SDPA_ARGS, args, strict=False)), **kwargs}
            return _bounded_attention(func, call, self.bounds.attention_bytes, self.stats)
        return func(*args, **kwargs)


@contextlib.contextmanager
def bounded_if_float64(dtype: torch.dtype,
                       bounds: Bounds | None = None) -> Iterator[dict[str, Any]]:
    """:class:`BoundedFloat64` for float64 (the yielded dict gets its statistics on exit)."""
    stats: dict[str, Any] = {}
    bounds = bounds or Bounds()
    if dtype != torch.float64:
        yield stats
        return
    with BoundedFloat64(bounds) as mode:
        yield stats
    stats.update(asdict(mode.stats), conv_limit_mb=bounds.conv_bytes / _MB,
                 attention_limit_mb=bounds.attention_bytes / _MB)
