"""The pipeline options in force during the device run: the record's ``pipeline`` section.

Read after placement, inside the device run's patches, from what the task applied (CPU offload, the
VAE options it set) and from the placed model itself (the VAE's ``use_slicing`` / ``use_tiling``, the
attention processors and the diffusers attention backend they dispatch to), so that the record says what
was in force rather than what was asked for::

    {"cpu_offload": false, "vae_slicing": false, "vae_tiling": true, "vae_tiling_options": {...},
     "attention_backend": "native", "attention_processors": ["LTXVideoAttnProcessor"],
     "patches_applied": ["diffusers_attention_backend"]}

``vae_slicing`` / ``vae_tiling`` are ``null`` when the model has no VAE with those switches;
``attention_backend`` is ``null`` when no attention processor goes through diffusers' dispatcher
(e.g. ``AttnProcessor2_0`` calls torch's SDPA directly: see ``attention_processors``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import torch


@dataclass
class PipelineState:
    """What the device run knows after placement: the task, the placed model, the patch entries it applied."""

    task: Any
    model: Any
    patches: Sequence[dict[str, Any]] = field(default_factory=list)


def pipeline_options(state: PipelineState) -> dict[str, Any]:
    """The record's ``pipeline`` section for ``state`` (see the module docstring)."""
    applied = state.task.applied_options()
    vae = _vae(state.model)
    return {
        "cpu_offload": bool(applied.get("cpu_offload", False)),
        "vae_slicing": _switch(vae, "use_slicing"),
        "vae_tiling": _switch(vae, "use_tiling"),
        "vae_tiling_options": dict((applied.get("vae") or {}).get("tiling") or {}),
        **attention(state.model),
        "patches_applied": [entry["name"] for entry in state.patches if "skipped" not in entry],
    }


def _vae(model: Any) -> Any:
    """A pipeline's ``vae`` component, the model itself when it is a VAE, else ``None``."""
    components = getattr(model, "components", None)
    if isinstance(components, dict):
        return components.get("vae")
    return model if hasattr(model, "use_slicing") or hasattr(model, "use_tiling") else None


def _switch(vae: Any, name: str) -> bool | None:
    value = getattr(vae, name, None) if vae is not None else None
    return None if value is None else bool(value)


def _modules(model: Any) -> Iterator[torch.nn.Module]:
    """Every module of ``model``, or of each module component of a pipeline."""
    components = getattr(model, "components", None)
    roots = components.values() if isinstance(components, dict) else [model]
    for root in roots:
        if isinstance(root, torch.nn.Module):
            yield from root.modules()


def attention(model: Any) -> dict[str, Any]:
    """``attention_backend`` (the diffusers dispatcher's backend in force, a name or a sorted list, or ``None``)
    and ``attention_processors`` (the attention processor classes found, sorted)."""
    processors = [m.processor for m in _modules(model) if getattr(m, "processor", None) is not None]
    dispatched = [p for p in processors if hasattr(p, "_attention_backend")]
    backends = sorted({str(_backend_name(p._attention_backend or _active_backend())) for p in dispatched})
    backend = None if not backends else backends[0] if len(backends) == 1 else backends
    return {"attention_backend": backend, "attention_processors": sorted({type(p).__name__ for p in processors})}


def _active_backend() -> Any:
    """diffusers' globally active attention backend (what a processor without its own uses)."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    return _AttentionBackendRegistry.get_active_backend()[0]


def _backend_name(backend: Any) -> str:
    return str(getattr(backend, "value", backend))
