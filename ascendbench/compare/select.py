"""Which modules ``compare.layers`` names: ``all``, names, globs, child slices (``blocks[:3]``)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Sequence

import torch

from ascendbench.errors import ConfigError

_SLICE = re.compile(r"^(?P<prefix>[\w.]+)\[(?P<index>-?\d*(?::-?\d*){0,2})\]$")


def normalize_spec(layers: Any) -> str | list[str] | None:
    """``compare.layers`` as ``None`` (off), ``"all"`` or a list of patterns."""
    if layers is None or layers == [] or layers == "":
        return None
    if isinstance(layers, str):
        return "all" if layers.strip().lower() == "all" else [layers.strip()]
    if isinstance(layers, Sequence) or hasattr(layers, "__iter__"):
        patterns = [str(p).strip() for p in layers]
        return "all" if patterns == ["all"] else patterns
    raise ConfigError(f"compare.layers={layers!r} is not allowed; use null, all, or a list of "
                      "module name patterns such as '[decoder.mid_block,decoder.up_blocks.*]'.")


def named_modules(model: Any) -> dict[str, torch.nn.Module]:
    """``name -> module`` of a model, or of a pipeline's components (``<component>.<name>``)."""
    if isinstance(model, torch.nn.Module):
        return dict(model.named_modules())
    named: dict[str, torch.nn.Module] = {}
    for component, module in sorted((getattr(model, "components", None) or {}).items()):
        if isinstance(module, torch.nn.Module):
            named.update({f"{component}.{n}" if n else component: m
                          for n, m in module.named_modules()})
    return named


def _slice_children(named: dict[str, torch.nn.Module], prefix: str, index: str) -> list[str]:
    container = named.get(prefix)
    if container is None:
        return []
    children = [f"{prefix}.{name}" if prefix else name for name, _ in container.named_children()]
    if ":" in index:
        return children[slice(*[int(p) if p else None for p in index.split(":")])]
    position = int(index)
    return [children[position]] if -len(children) <= position < len(children) else []


def select_modules(model: Any, patterns: Sequence[str]) -> list[str]:
    """Module names ``patterns`` match, in ``named_modules()`` order (a ConfigError for none)."""
    named = named_modules(model)
    chosen: set[str] = set()
    for pattern in patterns:
        match = _SLICE.match(pattern)
        found = (_slice_children(named, match["prefix"], match["index"]) if match
                 else [n for n in named if n and fnmatch.fnmatchcase(n, pattern)])
        if not found:
            top = [n for n in named if n and n.count(".") <= 1][:20]
            hint = ", ".join(top) + (" ..." if len(named) > len(top) else "")
            raise ConfigError(
                f"compare.layers pattern {pattern!r} matches no module of {type(model).__name__}. "
                "Patterns are module names, fnmatch globs (decoder.up_blocks.*) or container "
                f"slices (blocks[:3], blocks[-1]); this model's modules start with: {hint}.")
        chosen.update(found)
    return [n for n in named if n in chosen]
