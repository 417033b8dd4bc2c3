"""The ``flex_attention_dense`` patch: flex_attention + create_block_mask -> dense-mask SDPA.

Code written for ``torch.nn.attention.flex_attention`` usually keeps the (compiled) callables on its
modules, e.g. videoflextok's ``FlexAttention.flex_attention = torch.compile(flex_attention)`` and its
sequence packers' ``create_block_mask = torch.compiler.disable(create_block_mask_cached)``. This patch
replaces such instance attributes on every submodule of the model (and, optionally, module-level
functions named by dotted path) with :func:`dense_flex_attention` and a caching
:func:`dense_create_block_mask`, and puts the originals back on restore.

Options (all configurable in ``model.patches``):
    attention_attrs: instance attribute names holding a flex_attention callable.
    block_mask_attrs: instance attribute names holding a create_block_mask callable.
    module_classes: class names the submodules must have (``None``: any submodule).
    functions: ``{"package.module.name": "attention" | "block_mask"}`` module-level callables.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, Sequence

import torch

from ascendbench.errors import PatchError
from ascendbench.patches.flex_dense import BlockMaskRequest, DenseBlockMask, dense_flex_attention
from ascendbench.patches.registry import Check, Patch, register_patch

KINDS = ("attention", "block_mask")
_MISSING = object()


def _flex_available(patch: "FlexAttentionDense", target: Any) -> str | None:
    try:
        importlib.import_module("torch.nn.attention.flex_attention")
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.flex_attention (added in torch 2.5)"
    return None


def _functions_resolve(patch: "FlexAttentionDense", target: Any) -> str | None:
    bad = [path for path in patch.functions if _resolve(path) is None]
    return f"cannot import {', '.join(bad)} (options `functions`)" if bad else None


def _targets_found(patch: "FlexAttentionDense", target: Any) -> str | None:
    if patch.find_targets(target) or patch.functions:
        return None
    return (f"no submodule of {type(target).__name__} has an instance attribute named "
            f"{list(patch.attention_attrs) + list(patch.block_mask_attrs)}"
            + (f" among classes {list(patch.module_classes)}" if patch.module_classes else "")
            + "; set the patch options attention_attrs / block_mask_attrs / module_classes / functions "
            "to where the model keeps its flex_attention and create_block_mask callables")


def _resolve(path: str) -> tuple[Any, str] | None:
    module_name, _, attr = path.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except (ImportError, ValueError):
        return None
    return (owner, attr) if hasattr(owner, attr) else None


def _plain_callable(value: Any) -> bool:
    """A callable stored on an instance that is not a submodule (a function, a compiled function)."""
    return callable(value) and not isinstance(value, torch.nn.Module)


class _CachingBlockMaskFactory:
    """``create_block_mask`` replacement that reuses one :class:`DenseBlockMask` per mask and size."""

    def __init__(self) -> None:
        self.cache: dict[tuple, DenseBlockMask] = {}

    def __call__(self, mask_mod: Any, *args: Any, **kwargs: Any) -> DenseBlockMask:
        # Same call forms as create_block_mask (it replaces it): the arguments after mask_mod are bound once.
        request = BlockMaskRequest.bind(args, kwargs)
        key = (mask_mod, request.B, request.H, int(request.Q_LEN), int(request.KV_LEN), str(request.device))
        try:
            if key not in self.cache:
                self.cache[key] = DenseBlockMask.for_request(mask_mod, request)
            return self.cache[key]
        except TypeError:  # an unhashable mask_mod: no caching
            return DenseBlockMask.for_request(mask_mod, request)


@register_patch(
    "flex_attention_dense",
    checks=(Check("torch_flex_attention", _flex_available), Check("functions_importable", _functions_resolve),
            Check("targets_found", _targets_found)),
    install_hint="flex_attention needs torch>=2.5 (`pip install -U torch`, or the torch build that matches "
                 "torch_npu on Ascend); the patch options say where the model keeps its callables.",
)
class FlexAttentionDense(Patch):
    """Replace flex_attention / create_block_mask callables of a model with dense equivalents.

    Args:
        attention_attrs: instance attributes holding a flex_attention callable.
        block_mask_attrs: instance attributes holding a create_block_mask callable.
        module_classes: restrict to submodules of these class names (``None``: any).
        functions: module-level callables by dotted path -> ``attention`` or ``block_mask``.
    """

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
            raise PatchError(f"patch 'flex_attention_dense' option functions={bad}: each value must be one of "
                             f"{', '.join(KINDS)} (what the callable is).")
        self._saved: list[tuple[Any, str, Any]] = []

    def find_targets(self, target: Any) -> list[tuple[Any, str, str]]:
        """``(owner module, attribute, kind)`` for every instance attribute to replace."""
        modules = target.modules() if isinstance(target, torch.nn.Module) else ()
        found = []
        for module in modules:
            if self.module_classes and type(module).__name__ not in self.module_classes:
                continue
            for attrs, kind in ((self.attention_attrs, "attention"), (self.block_mask_attrs, "block_mask")):
                found += [(module, attr, kind) for attr in attrs if _plain_callable(module.__dict__.get(attr))]
        return found

    def apply(self, target: Any) -> dict[str, Any]:
        """Swap in the dense callables; return the counts and the patched classes and functions."""
        factory = _CachingBlockMaskFactory()
        replacement = {"attention": dense_flex_attention, "block_mask": factory}
        counts = {kind: 0 for kind in KINDS}
        classes: set[str] = set()
        for owner, attr, kind in self.find_targets(target):
            self._swap(owner, attr, replacement[kind])
            counts[kind] += 1
            classes.add(type(owner).__name__)
        for path, kind in self.functions.items():
            owner, attr = _resolve(path)
            self._swap(owner, attr, replacement[kind])
        return {"targets": counts, "classes": sorted(classes), "functions": dict(self.functions)}

    def _swap(self, owner: Any, attr: str, new: Any) -> None:
        old = owner.__dict__.get(attr, _MISSING) if hasattr(owner, "__dict__") else getattr(owner, attr)
        self._saved.append((owner, attr, old))
        setattr(owner, attr, new)

    def restore(self) -> None:
        """Put every original callable back (an attribute that was not there is removed)."""
        while self._saved:
            owner, attr, old = self._saved.pop()
            if old is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, old)
