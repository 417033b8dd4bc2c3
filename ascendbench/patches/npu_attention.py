"""What diffusers' attention backends really do on an NPU, and the guard the attention patch puts around them.

Checked against diffusers' own ``models/attention_dispatch.py`` and torch_npu's op-plugin:

* **Contract**: diffusers registers ``_native_npu`` with ``_check_qkv_dtype_bf16_or_fp16`` (0.36.0 line
  1999, the check itself at 394; 0.37.1 and 0.38.0 the same constraints); a float32 run is outside it (the patch
  then skips itself).
* **Masks**: 0.36.0's ``_native_npu_attention`` has no ``attn_mask`` parameter, and ``dispatch_attention_fn`` keeps
  only the arguments a backend declares, so the mask is dropped. 0.37.1 converts only 2-D ``[B, Skv]`` masks
  (``_maybe_modify_attn_mask_npu``: ``~attn_mask.to(torch.bool)``) and passes 4-D ones unchanged; 0.38.0 also
  expands ``(B, 1, 1, Skv)``; both read the mask as boolean (True = attend) and invert it for
  ``npu_fusion_attention``, whose ``atten_mask`` is 1 = masked. LTX's processor passes a float *additive* mask
  (0 / -10000, ``attention_mask.view(batch, heads, -1, Skv)``), which ``.to(torch.bool)`` turns into the opposite.
  :func:`boolean_mask` converts it to the boolean ``[B, Skv]`` form every version from 0.37 maps correctly;
  on a diffusers that drops masks, a mask that hides anything is refused.
* **Kernels**: ``_native_npu`` always calls ``torch_npu.npu_fusion_attention``. diffusers' ``native`` backend calls
  ``torch.nn.functional.scaled_dot_product_attention``, which torch_npu itself routes to ``npu_fusion_attention``
  when the mask is absent or boolean, the heads <= 2048, the head size <= 512 and the chip is Ascend910B1 or newer
  (op-plugin ``op_plugin/ops/opapi/ScaledDotProductAttentionKernelNpuOpApi.cpp``, ``scaled_dot_product_attention``,
  master @517f2e7d); otherwise (a float mask, an older chip) the decomposed math path.
  :class:`KernelLog` counts which of them each call took, for the record and the A/B table.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import torch

from ascendbench.errors import PatchError

MASKED_BELOW = -1000.0  # an additive mask's "masked" entries: LTX uses -10000, others -inf or finfo.min
FUSED = "npu_fusion_attention"
SDPA_FUSED = f"{FUSED} (torch_npu's SDPA: no or boolean mask)"
SDPA_MATH = "SDPA math path (torch_npu's SDPA: a float mask, or a shape or chip its fused kernel refuses)"
FIRST_FUSED_SDPA_CHIP = "Ascend910B1"
N_LIMIT, D_LIMIT = 2048, 512  # op-plugin ScaledDotProductAttentionKernelNpuOpApi.cpp: N_LIMIT, D_LIMIT


def boolean_mask(mask: torch.Tensor, batch: int) -> torch.Tensor:
    """``mask`` (boolean, or additive float: 0 attend, <= -1000 masked) as a boolean ``[B, Skv]``, True = attend.

    Raises:
        PatchError: the mask is not a plain attend/mask mask (a bias), or it differs between heads or queries.
    """
    keep = mask if mask.dtype == torch.bool else _additive_to_keep(mask)
    if keep.ndim == 4:
        flat = keep.reshape(keep.shape[0], -1, keep.shape[-1])
        if not bool(torch.all(flat == flat[:, :1, :])):
            raise PatchError("the attention mask differs between heads or query positions; _native_npu takes it "
                             "only as one [batch, key] mask here. Use the `native` backend for this model.")
        keep = flat[:, 0, :]
    if keep.ndim != 2 or keep.shape[0] not in (1, batch):
        raise PatchError(f"an attention mask of shape {tuple(mask.shape)} cannot be given to _native_npu as "
                         f"[batch, key]; use the `native` backend for this model.")
    return keep.expand(batch, -1).contiguous()


def _additive_to_keep(mask: torch.Tensor) -> torch.Tensor:
    keep, masked = mask == 0, mask <= MASKED_BELOW
    if not bool(torch.all(keep | masked)):
        raise PatchError("the float attention mask holds values other than 0 and large negatives (a bias, not a "
                         "mask); npu_fusion_attention's atten_mask is boolean. Use the `native` backend.")
    return keep


def sdpa_kernel(query: torch.Tensor, mask: torch.Tensor | None, chip: str | None) -> str:
    """The kernel torch's SDPA runs for one diffusers ``native`` call (``query`` is B, S, N, D) on this device."""
    if query.device.type != "npu":
        return f"torch SDPA on {query.device.type}"
    fused_ok = (mask is None or mask.dtype == torch.bool) and query.shape[2] <= N_LIMIT and query.shape[3] <= D_LIMIT
    return SDPA_FUSED if fused_ok and _a2_or_newer(chip) else SDPA_MATH


def _a2_or_newer(chip: str | None) -> bool:
    from ascendbench.devices.npu import PRE_A2_SOCS

    return bool(chip) and chip not in PRE_A2_SOCS


class KernelLog:
    """Wraps one registered diffusers backend function: converts or refuses masks, counts the kernels run."""

    def __init__(self, backend: str, original: Callable[..., Any], accepts_mask: bool) -> None:
        self.backend, self.original, self.accepts_mask = backend, original, accepts_mask
        self.calls: Counter[str] = Counter()
        self.masks: Counter[str] = Counter()

    def __call__(self, **kwargs: Any) -> Any:
        """The backend call as ``dispatch_attention_fn`` makes it (keyword arguments only)."""
        mask = kwargs.get("attn_mask")
        self.masks["none" if mask is None else "bool" if mask.dtype == torch.bool else "float"] += 1
        if self.backend == "_native_npu":
            kwargs = self._npu_mask(kwargs)
            self.calls[FUSED] += 1
        else:
            self.calls[sdpa_kernel(kwargs["query"], mask, _chip())] += 1
        if not self.accepts_mask:
            kwargs.pop("attn_mask", None)
        return self.original(**kwargs)

    def _npu_mask(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        mask = kwargs.get("attn_mask")
        if mask is None:
            return kwargs
        keep = boolean_mask(mask, kwargs["query"].shape[0])
        if not self.accepts_mask and not bool(torch.all(keep)):
            raise PatchError("this diffusers' _native_npu drops the attention mask (diffusers 0.36: "
                             "_native_npu_attention has no attn_mask), and this model's mask hides key positions: "
                             "the outputs would be wrong. Use diffusers >= 0.37 or the `native` backend.")
        return {**kwargs, "attn_mask": keep}

    def summary(self) -> dict[str, Any]:
        """``{kernels: {kernel: calls}, masks: {none|bool|float: calls}}`` for the record."""
        return {"kernels": dict(self.calls), "masks": dict(self.masks)}


def _chip() -> str | None:
    npu = getattr(torch, "npu", None)
    try:
        return str(npu.get_device_name()) if npu is not None else None
    except Exception:  # noqa: BLE001 - no NPU runtime: the chip is unknown and the fused path is not claimed
        return None


def install(backend: str) -> tuple[KernelLog, Callable[[], None]] | None:
    """Wrap diffusers' registered function of ``backend``; return the log and the undo, or None if unregistered."""
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    name = AttentionBackendName(backend)
    original = _AttentionBackendRegistry._backends.get(name)
    if original is None:
        return None
    names = set(_AttentionBackendRegistry._supported_arg_names[name])
    guard = KernelLog(backend, original, accepts_mask="attn_mask" in names)
    _AttentionBackendRegistry._backends[name] = guard
    _AttentionBackendRegistry._supported_arg_names[name] = names | {"attn_mask"}

    def undo() -> None:
        _AttentionBackendRegistry._backends[name] = original
        _AttentionBackendRegistry._supported_arg_names[name] = names

    return guard, undo
