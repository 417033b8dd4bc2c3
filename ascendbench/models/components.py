"""Pipeline components built from their architecture config: random init, or shapes only for estimates.

A pipeline YAML lists each component under ``model.loader.components`` with a ``kind`` that picks the
builder from :data:`BUILDERS` (a lookup table, not branches):

* ``diffusers``    -- ``class_path`` + ``config``: ``cls.from_config(config)`` (models and schedulers);
* ``transformers`` -- ``class_path`` + ``config_class`` + ``config``: ``cls(config_class(**config))``;
* ``tokenizer``    -- an in-memory tokenizer (:func:`ascendbench.models.tokenizer.build_tokenizer`).

The key is ``kind`` and not Hydra's ``_target_`` on purpose: Hydra would build every component while
building the loader, before the memory check had a chance to refuse a model too big for the host.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError
from ascendbench.models.loader import import_class
from ascendbench.models.memory import count_meta_params


def plain(value: Any) -> Any:
    """A config node as plain Python containers (anything else unchanged)."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


def _diffusers(spec: Mapping[str, Any]) -> Any:
    cls = import_class(spec["class_path"])
    return cls.from_config(dict(spec.get("config") or {}))


def _transformers(spec: Mapping[str, Any]) -> Any:
    cls = import_class(spec["class_path"])
    config_cls = import_class(spec["config_class"])
    return cls(config_cls(**dict(spec.get("config") or {})))


def _tokenizer(spec: Mapping[str, Any]) -> Any:
    from ascendbench.models.tokenizer import build_tokenizer

    return build_tokenizer(**{k: v for k, v in spec.items() if k != "kind"})


BUILDERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "diffusers": _diffusers,
    "transformers": _transformers,
    "tokenizer": _tokenizer,
}
# Kinds whose objects hold tensors (and so count towards memory).
TENSOR_KINDS = ("diffusers", "transformers")


def _check_spec(name: str, spec: Mapping[str, Any]) -> None:
    kind = spec.get("kind")
    if kind not in BUILDERS:
        raise ConfigError(
            f"model.loader.components.{name}.kind={kind!r} is not a known component kind; allowed: "
            f"{', '.join(BUILDERS)}. Give e.g. `kind: diffusers` with `class_path` and `config`."
        )
    needed = {"diffusers": ("class_path",), "transformers": ("class_path", "config_class"), "tokenizer": ()}[kind]
    missing = [key for key in needed if not spec.get(key)]
    if missing:
        raise ConfigError(
            f"model.loader.components.{name} (kind {kind}) lacks {', '.join(missing)}; a {kind} component "
            f"needs {', '.join(needed)} (and `config`, the constructor arguments)."
        )


def build_component(name: str, spec: Mapping[str, Any], seed: int) -> Any:
    """Build one component with weights drawn from ``torch.manual_seed(seed)`` (global RNG restored)."""
    spec = plain(spec)
    _check_spec(name, spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        component = BUILDERS[spec["kind"]](spec)
    if isinstance(component, torch.nn.Module):
        component.eval()
    return component


def build_components(specs: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """All components, each seeded with ``seed`` (in name order, so the result never depends on order)."""
    return {name: build_component(name, specs[name], seed) for name in sorted(specs)}


def count_component_params(specs: Mapping[str, Any]) -> dict[str, int]:
    """Parameters and buffers of every tensor-holding component, counted on the ``meta`` device."""
    counts = {}
    for name in sorted(specs):
        spec = plain(specs[name])
        _check_spec(name, spec)
        if spec["kind"] in TENSOR_KINDS:
            count = count_meta_params(lambda spec=spec: BUILDERS[spec["kind"]](spec))
            if count:  # schedulers hold no tensors
                counts[name] = count
    return counts
