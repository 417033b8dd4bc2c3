"""The ``diffusers_attention_backend`` patch: a named backend where diffusers' contract holds."""

from __future__ import annotations

import importlib.util
from collections import Counter
from contextlib import ExitStack
from typing import Any, Callable, Sequence

import torch

from ascendbench.devices.npu import PRE_A2_SOCS
from ascendbench.errors import PatchError
from ascendbench.patches.registry import Check, Patch, register_patch

MASKED_BELOW = -1000.0  # an additive mask's "masked" entries: LTX uses -10000, others -inf
FUSED = "npu_fusion_attention"
SDPA_FUSED = f"{FUSED} (torch_npu's SDPA: no or boolean mask)"
SDPA_MATH = ("SDPA math path (torch_npu's SDPA: a float mask, or a shape or chip its fused kernel "
             "refuses)")
N_LIMIT, D_LIMIT = 2048, 512  # op-plugin ScaledDotProductAttentionKernelNpuOpApi.cpp
_REQUIREMENTS = {"_native_npu": ("torch_npu", "torch_npu (the Ascend adapter of your CANN)")}
_HALF_ONLY = {"_native_npu"}  # registered with _check_qkv_dtype_bf16_or_fp16
_GUARDED = ("_native_npu", "native")  # backends whose calls KernelLog counts


def boolean_mask(mask: torch.Tensor, batch: int) -> torch.Tensor:
    """``mask`` (boolean, or float: 0 or <= -1000) as a boolean ``[B, Skv]`` (True: attend)."""
    keep = mask
    if mask.dtype != torch.bool:
        keep, masked = mask == 0, mask <= MASKED_BELOW
        if not bool(torch.all(keep | masked)):
            raise PatchError("the float attention mask holds values other than 0 and large "
                             "negatives (a bias, not a mask); npu_fusion_attention's atten_mask is "
                             "boolean. Use the `native` backend.")
    if keep.ndim == 4:
        flat = keep.reshape(keep.shape[0], -1, keep.shape[-1])
        if not bool(torch.all(flat == flat[:, :1, :])):
            raise PatchError("the attention mask differs between heads or query positions; "
                             "_native_npu takes it only as one [batch, key] mask here. Use the "
                             "`native` backend for this model.")
        keep = flat[:, 0, :]
    if keep.ndim != 2 or keep.shape[0] not in (1, batch):
        raise PatchError(f"an attention mask of shape {tuple(mask.shape)} cannot be given to "
                         "_native_npu as [batch, key]; use the `native` backend for this model.")
    return keep.expand(batch, -1).contiguous()


def sdpa_kernel(query: torch.Tensor, mask: torch.Tensor | None, chip: str | None) -> str:
    """The kernel torch's SDPA runs for a ``native`` call (torch_npu's fused one on 910B1+)."""
    if query.device.type != "npu":
        return f"torch SDPA on {query.device.type}"
    fused = (mask is None or mask.dtype == torch.bool) and query.shape[2] <= N_LIMIT \
        and query.shape[3] <= D_LIMIT and bool(chip) and chip not in PRE_A2_SOCS
    return SDPA_FUSED if fused else SDPA_MATH


def _chip() -> str | None:
    npu = getattr(torch, "npu", None)
    try:
        return str(npu.get_device_name()) if npu is not None else None
    except Exception:  # noqa: BLE001 - no NPU runtime: the chip is unknown, no fused path claimed
        return None


class KernelLog:
    """Wraps a registered diffusers backend function: converts or refuses masks, counts kernels."""

    def __init__(self, backend: str, original: Callable[..., Any], accepts_mask: bool) -> None:
        self.backend, self.original, self.accepts_mask = backend, original, accepts_mask
        self.calls: Counter[str] = Counter()
        self.masks: Counter[str] = Counter()

    def __call__(self, **kwargs: Any) -> Any:
        """The backend call as ``dispatch_attention_fn`` makes it (keyword arguments only)."""
        mask = kwargs.get("attn_mask")
        self.masks["none" if mask is None else "bool" if mask.dtype == torch.bool else "float"] += 1
        if self.backend != "_native_npu":
            self.calls[sdpa_kernel(kwargs["query"], mask, _chip())] += 1
        else:
            if mask is not None:
                keep = boolean_mask(mask, kwargs["query"].shape[0])
                if not self.accepts_mask and not bool(torch.all(keep)):
                    raise PatchError(
                        "this diffusers' _native_npu drops the attention mask (diffusers 0.36: "
                        "_native_npu_attention has no attn_mask), and this model's mask hides key "
                        "positions: the outputs would be wrong. Use diffusers >= 0.37 or the "
                        "`native` backend.")
                kwargs = {**kwargs, "attn_mask": keep}
            self.calls[FUSED] += 1
        if not self.accepts_mask:
            kwargs.pop("attn_mask", None)
        return self.original(**kwargs)

    def summary(self) -> dict[str, Any]:
        """``{kernels: {kernel: calls}, masks: {none|bool|float: calls}}`` for the record."""
        return {"kernels": dict(self.calls), "masks": dict(self.masks)}


def _dispatcher(patch: DiffusersAttentionBackend, target: Any) -> str | None:
    try:
        from diffusers.models.attention_dispatch import AttentionBackendName  # deferred: heavy
    except ImportError as exc:
        return f"diffusers has no attention dispatcher ({exc}); diffusers>=0.35 has one"
    names = {member.value for member in AttentionBackendName}
    if patch.backend not in names:
        return (f"backend={patch.backend!r} is not a diffusers attention backend; known: "
                f"{', '.join(sorted(names))}")
    return None


def _requirements(patch: DiffusersAttentionBackend, target: Any) -> str | None:
    package, what = _REQUIREMENTS.get(patch.backend, (None, None))
    if package is not None and importlib.util.find_spec(package) is None:
        return f"backend {patch.backend!r} needs {what}, which is not installed"
    return None


def _models_found(patch: DiffusersAttentionBackend, target: Any) -> str | None:
    if patch.models(target):
        return None
    named = f" named {list(patch.components)}" if patch.components else ""
    return (f"{type(target).__name__} is neither a diffusers model with set_attention_backend nor "
            f"a pipeline with such components{named}")


@register_patch(
    "diffusers_attention_backend",
    checks=(Check("diffusers_dispatcher", _dispatcher),
            Check("backend_requirements", _requirements), Check("models_found", _models_found)),
    install_hint="Install what the backend needs (for _native_npu: torch_npu matching the host's "
                 "CANN, see https://gitee.com/ascend/pytorch), or choose another backend with "
                 "`{name: diffusers_attention_backend, backend: native}`.",
    devices=("npu",),
)
class DiffusersAttentionBackend(Patch):
    """Set a diffusers attention backend on a model or the pipeline's ``components`` (None: all)."""

    def __init__(self, backend: str = "_native_npu",
                 components: Sequence[str] | None = None) -> None:
        self.backend = str(backend).lower()
        self.components = tuple(components) if components else None
        self._stack = ExitStack()
        self._saved: list[tuple[Any, list[tuple[Any, Any]]]] = []

    def skip_reason(self, dtype: str | None) -> str | None:
        """float32 with a half-only backend is outside diffusers' contract: the default stays."""
        if dtype == "float32" and self.backend in _HALF_ONLY:
            return (f"dtype=float32: diffusers registers {self.backend} for bfloat16/float16 only "
                    "(_check_qkv_dtype_bf16_or_fp16), so this float32 run keeps diffusers' default "
                    "attention")
        return None

    def models(self, target: Any) -> list[tuple[str, Any]]:
        """``(name, model)`` pairs the backend is set on."""
        if hasattr(target, "set_attention_backend"):
            return [(type(target).__name__, target)]
        components = getattr(target, "components", None) or {}
        return [(name, comp) for name, comp in components.items()
                if hasattr(comp, "set_attention_backend")
                and (self.components is None or name in self.components)]

    def apply(self, target: Any) -> dict[str, Any]:
        """Enter diffusers' backend context, set the backend on each model, log its kernels."""
        from diffusers.models.attention_dispatch import (  # deferred: diffusers is heavy
            AttentionBackendName,
            _AttentionBackendRegistry,
            attention_backend,
        )

        try:
            self._stack.enter_context(attention_backend(self.backend))
        except (RuntimeError, ValueError) as exc:
            raise PatchError(f"diffusers refused attention backend {self.backend!r}: {exc}. "
                             f"{self.install_hint}") from exc
        names = []
        for name, model in self.models(target):
            processors = [m.processor for m in model.modules()
                          if hasattr(getattr(m, "processor", None), "_attention_backend")]
            self._saved.append((model, [(p, p._attention_backend) for p in processors]))
            model.set_attention_backend(self.backend)
            names.append(name)
        info: dict[str, Any] = {"backend": self.backend, "models": names}
        key = AttentionBackendName(self.backend)
        original = _AttentionBackendRegistry._backends.get(key)
        if self.backend in _GUARDED and original is not None:
            args = set(_AttentionBackendRegistry._supported_arg_names[key])
            guard = KernelLog(self.backend, original, accepts_mask="attn_mask" in args)
            backends, arg_names = (_AttentionBackendRegistry._backends,
                                   _AttentionBackendRegistry._supported_arg_names)
            backends[key], arg_names[key] = guard, args | {"attn_mask"}
            self._stack.callback(backends.__setitem__, key, original)
            self._stack.callback(arg_names.__setitem__, key, args)
            info.update(kernels=guard.calls, masks=guard.masks)  # filled while the model runs
        return info

    def restore(self) -> None:
        """Reset each model's backend, processors and registered function, then the global."""
        while self._saved:
            model, before = self._saved.pop()
            model.reset_attention_backend()
            for processor, backend in before:
                if backend is not None:
                    processor._attention_backend = backend
        self._stack.close()
