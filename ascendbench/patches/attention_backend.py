"""The ``diffusers_attention_backend`` patch: run a diffusers model on a named attention backend.

Sets the backend through diffusers' own dispatcher (``ModelMixin.set_attention_backend``) on the model
or on every model component of a pipeline, inside diffusers' ``attention_backend`` context, and
restores with ``reset_attention_backend()`` (plus any backend a processor had before) and the
previously active global backend. Default backend: ``_native_npu`` (``torch_npu.npu_fusion_attention``),
applied on NPU runs only. It never calls ``disable_npu_flash_attention()``, which would switch LTX
modules to the NPU backend behind the dispatcher's back.

``_native_npu`` is applied only where diffusers' contract holds: a float32 run skips the patch (recorded, with the
reason); LTX's float masks are converted to the boolean form, or refused on a diffusers that drops them; and the
record says which kernel each call actually ran (:mod:`ascendbench.patches.npu_attention`).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Sequence

from ascendbench.errors import PatchError
from ascendbench.patches import npu_attention
from ascendbench.patches.registry import Check, Patch, register_patch

_REQUIREMENTS = {"_native_npu": ("torch_npu", "torch_npu (the Ascend PyTorch adapter matching your CANN)")}
_HALF_ONLY = {"_native_npu"}  # diffusers registers these with _check_qkv_dtype_bf16_or_fp16
_GUARDED = ("_native_npu", "native")  # backends whose calls are counted by kernel (npu_attention.KernelLog)


def _dispatcher(patch: "DiffusersAttentionBackend", target: Any) -> str | None:
    try:
        from diffusers.models.attention_dispatch import AttentionBackendName
    except ImportError as exc:
        return f"diffusers has no attention dispatcher ({exc}); diffusers>=0.35 has one"
    names = {member.value for member in AttentionBackendName}
    if patch.backend not in names:
        return f"backend={patch.backend!r} is not a diffusers attention backend; known: {', '.join(sorted(names))}"
    return None


def _requirements(patch: "DiffusersAttentionBackend", target: Any) -> str | None:
    package, what = _REQUIREMENTS.get(patch.backend, (None, None))
    if package is None:
        return None
    import importlib.util

    if importlib.util.find_spec(package) is None:
        return f"backend {patch.backend!r} needs {what}, which is not installed"
    return None


def _models_found(patch: "DiffusersAttentionBackend", target: Any) -> str | None:
    if patch.models(target):
        return None
    return (f"{type(target).__name__} is neither a diffusers model with set_attention_backend nor a pipeline "
            f"with such components" + (f" named {list(patch.components)}" if patch.components else ""))


@register_patch(
    "diffusers_attention_backend",
    checks=(Check("diffusers_dispatcher", _dispatcher), Check("backend_requirements", _requirements),
            Check("models_found", _models_found)),
    install_hint="Install what the backend needs (for _native_npu: torch_npu matching the host's CANN, see "
                 "https://gitee.com/ascend/pytorch), or choose another backend with "
                 "`{name: diffusers_attention_backend, backend: native}`.",
    devices=("npu",),
)
class DiffusersAttentionBackend(Patch):
    """Set a diffusers attention backend on a model or a pipeline's model components.

    Args:
        backend: a ``diffusers.models.attention_dispatch.AttentionBackendName`` value.
        components: pipeline component names to set it on (``None``: every diffusers model).
    """

    def __init__(self, backend: str = "_native_npu", components: Sequence[str] | None = None) -> None:
        self.backend = str(backend).lower()
        self.components = tuple(components) if components else None
        self._stack: ExitStack | None = None
        self._saved: list[tuple[Any, list[tuple[Any, Any]]]] = []
        self._undo_guard: Any = None

    def skip_reason(self, dtype: str | None) -> str | None:
        """float32 with a half-only backend: outside diffusers' contract, so the run keeps its default backend."""
        if dtype == "float32" and self.backend in _HALF_ONLY:
            return (f"dtype=float32: diffusers registers {self.backend} for bfloat16/float16 only "
                    f"(_check_qkv_dtype_bf16_or_fp16), so this float32 run keeps diffusers' default attention")
        return None

    def models(self, target: Any) -> list[tuple[str, Any]]:
        """``(name, model)`` pairs the backend is set on."""
        if hasattr(target, "set_attention_backend"):
            return [(type(target).__name__, target)]
        components = getattr(target, "components", None) or {}
        return [(name, comp) for name, comp in components.items()
                if hasattr(comp, "set_attention_backend") and (self.components is None or name in self.components)]

    def apply(self, target: Any) -> dict[str, Any]:
        """Enter diffusers' backend context and set the backend on each model."""
        from diffusers.models.attention_dispatch import attention_backend

        self._stack = ExitStack()
        try:
            self._stack.enter_context(attention_backend(self.backend))
        except (RuntimeError, ValueError) as exc:
            self._stack = None
            raise PatchError(f"diffusers refused attention backend {self.backend!r}: {exc}. "
                             f"{self.install_hint}") from exc
        names = []
        for name, model in self.models(target):
            self._saved.append((model, _processor_backends(model)))
            model.set_attention_backend(self.backend)
            names.append(name)
        info: dict[str, Any] = {"backend": self.backend, "models": names}
        installed = npu_attention.install(self.backend) if self.backend in _GUARDED else None
        if installed is not None:
            guard, self._undo_guard = installed
            info.update(kernels=guard.calls, masks=guard.masks)  # filled while the model runs
        return info

    def restore(self) -> None:
        """``reset_attention_backend()`` on each model, earlier per-processor backends back, old global."""
        while self._saved:
            model, before = self._saved.pop()
            model.reset_attention_backend()
            for processor, backend in before:
                if backend is not None:
                    processor._attention_backend = backend
        if self._undo_guard is not None:
            self._undo_guard()
            self._undo_guard = None
        if self._stack is not None:
            self._stack.close()
            self._stack = None


def _processor_backends(model: Any) -> list[tuple[Any, Any]]:
    """Each attention processor of ``model`` with its current ``_attention_backend``."""
    pairs = []
    for module in model.modules():
        processor = getattr(module, "processor", None)
        if processor is not None and hasattr(processor, "_attention_backend"):
            pairs.append((processor, processor._attention_backend))
    return pairs
