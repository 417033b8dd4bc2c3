"""The loader interface, declared once: what a job asks of every ``model.loader`` (``_target_``).

    loaded = loader.load(source, weights, init_seed, revision)   # the model on the CPU, with its provenance
    found = loader.resolve(source, revision)                      # where the weights are (no download)
    meta = loader.build_meta(found, init_seed)                    # the model on the meta device (dry runs)

Subclasses implement :meth:`ModelLoader.load`; ``resolve`` and ``build_meta`` have defaults that fit a
diffusers-style class with ``config.json`` checkpoints, which a loader of another layout overrides
(:class:`~ascendbench.models.pipeline.PipelineLoader` resolves single files and pipeline directories).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from abc import ABC, abstractmethod
from typing import Any, Iterator

import torch

from ascendbench.errors import ConfigError
from ascendbench.models.sources import NotFound, ResolvedSource, resolve_source


def import_class(class_path: str) -> type:
    """``package.module.Class`` -> the class, or a :class:`ConfigError` naming the path."""
    module_name, _, attr = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"model.loader.class_path={class_path!r} cannot be imported ({exc}). Give a full dotted "
            "path to a class of an installed package, e.g. diffusers.AutoencoderKLFlux2."
        ) from exc


@contextlib.contextmanager
def hub_forced_offline() -> Iterator[None]:
    """huggingface_hub answers from its cache only inside this block (nothing is downloaded)."""
    from huggingface_hub import constants  # the hub client only where a lookup happens

    saved_env, saved_flag = os.environ.get("HF_HUB_OFFLINE"), constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"], constants.HF_HUB_OFFLINE = "1", True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved_flag
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


class ModelLoader(ABC):
    """Base class of every model loader.

    Attributes:
        subfolder: subfolder of a repository or directory holding the weights (``None``: the top).
        allow_pickle: whether pickle checkpoints may be read (``torch.load(weights_only=True)``).
    """

    subfolder: str | None = None
    allow_pickle: bool = False

    @abstractmethod
    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> Any:
        """The model per ``model.weights`` (auto | required | random), as a ``LoadedModel``."""

    def resolve(self, source: str | None, revision: str | None = None) -> Any:
        """Where the weights for ``source`` are: a ``ResolvedSource`` or a ``NotFound`` (local paths and the
        hub cache; call it inside :func:`hub_forced_offline` to be sure nothing is downloaded)."""
        return resolve_source(source, self.subfolder, revision, allow_pickle=self.allow_pickle, allow_network=False)

    def build_meta(self, found: Any, init_seed: int) -> Any:
        """The model as :meth:`load` would build it, on the ``meta`` device (no storage allocated).

        A checkpoint directory's ``config.json`` when the class reads one; otherwise the random-init path of
        :meth:`load` under ``torch.device("meta")``.
        """
        class_path = getattr(self, "class_path", None)
        if isinstance(found, ResolvedSource) and found.kind == "dir" and class_path:
            cls = import_class(class_path)
            if hasattr(cls, "load_config"):  # diffusers' ConfigMixin; other classes take the random-init path
                config = cls.load_config(str(found.path), subfolder=self.subfolder)
                with torch.device("meta"):
                    return cls.from_config(config)
        with torch.device("meta"), hub_forced_offline():
            return self.load(None, "random", int(init_seed), None).module


def locate(loader: Any, source: str | None, revision: str | None) -> Any:
    """``loader.resolve`` for a :class:`ModelLoader`; the generic lookup for any other loader object."""
    if isinstance(loader, ModelLoader):
        return loader.resolve(source, revision)
    return resolve_source(source, getattr(loader, "subfolder", None), revision,
                          allow_pickle=bool(getattr(loader, "allow_pickle", False)), allow_network=False)


__all__ = ["ModelLoader", "NotFound", "ResolvedSource", "hub_forced_offline", "import_class", "locate"]
