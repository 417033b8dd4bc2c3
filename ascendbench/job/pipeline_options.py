"""The record's ``pipeline`` section: the options in force during the device run, read after
placement from what the task applied and from the placed model (the VAE's slicing and tiling, the
attention processors and the diffusers attention backend they dispatch to); ``null`` where the
model has no such VAE or no dispatching processor.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch
from diffusers.models.attention_dispatch import _AttentionBackendRegistry


def pipeline_options(task: Any, model: Any,
                     patches: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The ``pipeline`` section for the task, the placed model and the patch entries applied."""
    applied = task.applied_options()
    components = getattr(model, "components", None)
    if isinstance(components, dict):
        vae = components.get("vae")
    else:
        vae = model if hasattr(model, "use_slicing") or hasattr(model, "use_tiling") else None
    return {
        "cpu_offload": bool(applied.get("cpu_offload", False)),
        "vae_slicing": _switch(vae, "use_slicing"),
        "vae_tiling": _switch(vae, "use_tiling"),
        "vae_tiling_options": dict((applied.get("vae") or {}).get("tiling") or {}),
        **attention(model),
        "patches_applied": [entry["name"] for entry in patches if "skipped" not in entry],
    }


def _switch(vae: Any, name: str) -> bool | None:
    value = getattr(vae, name, None) if vae is not None else None
    return None if value is None else bool(value)


def _modules(model: Any) -> Iterator[torch.nn.Module]:
    """Every module of ``model``, or of each module component of a pipeline."""
    components = getattr(model, "components", None)
    for root in components.values() if isinstance(components, dict) else [model]:
        if isinstance(root, torch.nn.Module):
            yield from root.modules()


def attention(model: Any) -> dict[str, Any]:
    """``attention_backend`` (the dispatcher's backend in force: a name, a sorted list, or ``None``)
    and ``attention_processors`` (the processor classes found, sorted)."""
    processors = [m.processor for m in _modules(model) if getattr(m, "processor", None) is not None]
    active = _AttentionBackendRegistry.get_active_backend()[0]  # for a processor without its own
    chosen = [p._attention_backend or active for p in processors
              if hasattr(p, "_attention_backend")]
    backends = sorted({str(getattr(backend, "value", backend)) for backend in chosen})
    backend = None if not backends else backends[0] if len(backends) == 1 else backends
    return {"attention_backend": backend,
            "attention_processors": sorted({type(p).__name__ for p in processors})}

