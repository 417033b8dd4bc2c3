"""FLOPs of one call (``FlopCounterMode``, plus CPU flash and Ascend fused attention formulas)."""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

log = logging.getLogger(__name__)
# torch's formulas by operator packet: ``flop_registry`` from torch 2.2, ``flop_mapping`` before.
BUILTIN_FORMULAS = getattr(flop_counter, "flop_registry", None) or flop_counter.flop_mapping

# Operator-name patterns of compute-heavy kernels; if one of these runs without a formula, say so.
DEFAULT_HEAVY_OPS = ("mm", "matmul", "linear", "conv", "attention", "einsum", "baddbmm", "addbmm")


def _sdpa_cpu_flop(*shapes: Any, **kwargs: Any) -> int:
    return sdpa_flop_count(*shapes[:3])  # query, key, value; the other arguments change nothing


def npu_fusion_attention_flop(query_shape: Sequence[int], key_shape: Sequence[int],
                              value_shape: Sequence[int], *args: Any, **kwargs: Any) -> int:
    """FLOPs of ``torch_npu.npu_fusion_attention`` (Q@K^T and P@V, masks ignored as in SDPA's).
    >>> npu_fusion_attention_flop((2, 128, 64), (2, 256, 64), (2, 256, 64), 4, "BSH")
    16777216"""
    named = {**dict(zip(("head_num", "input_layout"), args, strict=False)), **kwargs}
    heads, layout = int(named["head_num"]), str(named["input_layout"])
    shapes = (query_shape, key_shape, value_shape)
    return sdpa_flop_count(*(_bnsd(shape, heads, layout, query_shape) for shape in shapes))


def _bnsd(shape: Sequence[int], head_num: int, layout: str,
          query_shape: Sequence[int]) -> tuple[int, ...]:
    layout = str(layout).upper()
    if layout == "BNSD":
        return tuple(shape)
    if layout == "BSND":
        b, s, n, d = shape
        return (b, n, s, d)
    if layout in ("BSH", "SBH"):
        b, s, h = shape if layout == "BSH" else (shape[1], shape[0], shape[2])
        head_dim = query_shape[-1] // int(head_num)  # query's hidden size = head_num * head_dim
        return (b, h // head_dim, s, head_dim)
    raise ValueError(f"input_layout {layout!r} has no FLOP formula (varlen TND is not counted)")


# Extra formulas by operator name; those whose operator is absent here (npu without torch_npu) skip.
EXTRA_FORMULAS: dict[str, Callable[..., int]] = {
    "aten._scaled_dot_product_flash_attention_for_cpu": _sdpa_cpu_flop,
    "npu.npu_fusion_attention": npu_fusion_attention_flop}


def extra_formulas() -> dict[Any, Callable[..., int]]:
    """:data:`EXTRA_FORMULAS` keyed by the operator packets that exist in this process."""
    resolved = {}
    for name, formula in EXTRA_FORMULAS.items():
        namespace, _, op = name.partition(".")
        try:
            resolved[getattr(getattr(torch.ops, namespace), op)] = formula
        except (AttributeError, RuntimeError):
            continue
    return resolved


class _OpRecorder(TorchDispatchMode):
    """Counts every operator packet that actually executes (it sits below the FLOP counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen[func._overloadpacket] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class FlopCount:
    """FLOPs of one call: total, by operator, and heavy operators that ran without a formula."""

    flops: int
    by_op: dict[str, int] = field(default_factory=dict)
    uncounted_ops: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """True when every heavy operator that ran was counted."""
        return not self.uncounted_ops


def count_flops(call: Callable[[], Any], heavy_ops: Iterable[str] = DEFAULT_HEAVY_OPS) -> FlopCount:
    """Run ``call`` once under ``FlopCounterMode``; heavy ops without formula: ``uncounted_ops``."""
    formulas = extra_formulas()
    recorder = _OpRecorder()
    with recorder, FlopCounterMode(display=False, custom_mapping=formulas) as counter:
        call()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items() if n}
    known = set(BUILTIN_FORMULAS) | set(formulas)
    patterns = [re.compile(p) for p in heavy_ops]
    uncounted = {str(op): n for op, n in recorder.seen.items()
                 if op not in known and any(p.search(str(op)) for p in patterns)}
    if uncounted:
        log.warning("FLOPs not counted for %s: MFU is a lower bound", ", ".join(sorted(uncounted)))
    return FlopCount(flops=int(counter.get_total_flops()), by_op=by_op, uncounted_ops=uncounted)


def flops_section(count: FlopCount | None, median_ms: float, peak: Mapping[str, Any],
                  dtype: str, error: str | None = None) -> dict[str, Any]:
    """The record's ``bench.flops``: per-call FLOPs, TFLOP/s from the median, peak and MFU."""
    if count is None:
        return {"skipped": error or "bench.flops.enabled=false", "peak_tflops": peak.get("tflops"),
                "peak_source": peak.get("source"), "dtype": dtype}
    achieved = count.flops / (median_ms * 1e-3) / 1e12 if median_ms > 0 and count.flops else None
    peak_tflops = peak.get("tflops")
    mfu = achieved / peak_tflops if achieved is not None and peak_tflops else None
    return {"per_call": count.flops, "per_call_tflop": count.flops / 1e12,
            "achieved_tflops": achieved, "peak_tflops": peak_tflops,
            "peak_source": peak.get("source"), "peak_entry": peak.get("entry"),
            "peak_missing": peak.get("missing"), "mfu": mfu, "dtype": dtype,
            "complete": count.complete, "uncounted_ops": count.uncounted_ops, "by_op": count.by_op,
            "counter": "torch.utils.flop_counter.FlopCounterMode, one call outside the timed loop"}
