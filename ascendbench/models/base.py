"""The loader interface: ``loader.load(source, weights, init_seed, revision)`` -> a model."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

from ascendbench.errors import ConfigError, MissingPackageError, WeightsNotFoundError
from ascendbench.models import sources
from ascendbench.models.memory import tensor_count

log = logging.getLogger(__name__)

WEIGHTS_MODES = ("auto", "required", "random")


def import_class(class_path: str, install_hint: str | None = None) -> Any:
    """``package.module.Class`` -> the class (MissingPackageError with ``install_hint``)."""
    module_name, _, attr = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except ModuleNotFoundError as exc:
        if install_hint:
            raise MissingPackageError(
                f"model.loader.class_path={class_path!r} needs the package "
                f"{(exc.name or module_name).split('.')[0]!r}, which is not installed. "
                f"{install_hint}"
            ) from exc
        error = exc
    except (ImportError, AttributeError, ValueError) as exc:
        error = exc
    if install_hint and isinstance(error, AttributeError):
        package = module_name.split(".")[0]
        raise MissingPackageError(
            f"model.loader.class_path={class_path!r}: the installed {package} "
            f"{importlib.metadata.version(package)} has no {attr}. {install_hint}") from error
    raise ConfigError(
        f"model.loader.class_path={class_path!r} cannot be imported ({error}). Give a full dotted "
        "path to a class of an installed package, e.g. diffusers.AutoencoderKLFlux2.") from error


@dataclass
class LoadedModel:
    """A model on the CPU, with the provenance of its weights (the record's ``weights``)."""

    module: Any
    weights: dict[str, Any]
    load_seconds: float


class ModelLoader(ABC):
    """Base class of every ``model.loader``: the weights-mode logic; attributes: the Layout."""

    subfolder: str | None = None
    filename: str | None = None
    allow_pickle: bool = False
    pipeline: bool = False
    class_path: str | None = None
    install_hint: str | None = None

    @abstractmethod
    def from_weights(self, found: sources.ResolvedSource, seed: int) -> tuple[Any, dict[str, Any]]:
        """The model with the weights of ``found``, and facts for the record beyond the files'."""

    @abstractmethod
    def random_init(self, seed: int, source: str | None, revision: str | None) -> tuple[Any, dict]:
        """The real architecture with weights drawn from ``torch.manual_seed(seed)``, and facts."""

    def loaded_info(self, found: sources.ResolvedSource) -> dict[str, Any]:
        """The record's ``weights`` of weights read from ``found`` (one read for every digest)."""
        digest, sha256sum, sizes = sources.files_digests(found.files)
        return {"kind": "loaded", "source": str(found.path), "origin": found.origin,
                "digest": digest, "sha256sum": sha256sum, "file_bytes": sizes,
                "format": "pickle" if found.pickle else "safetensors",
                "files": [p.name for p in found.files]}

    def finish(self, model: Any, info: dict[str, Any]) -> Any:
        """Last touches on a loaded or random-init model (eval mode by default)."""
        return model.eval()

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> LoadedModel:
        """The model per ``model.weights`` (auto | required | random), on the CPU."""
        if weights not in WEIGHTS_MODES:
            raise ConfigError(
                f"model.weights={weights!r} is not allowed; use one of {', '.join(WEIGHTS_MODES)} "
                "(e.g. `model.weights=random` to run the architecture with random weights).")
        if self.class_path:  # a missing package is named before any lookup
            import_class(self.class_path, self.install_hint)
        start, seed = time.perf_counter(), int(init_seed)
        layout = sources.Layout.of(self)
        found = None if weights == "random" else sources.resolve_source(source, layout, revision)
        if isinstance(found, sources.ResolvedSource):
            model, extra = self.from_weights(found, seed)
            info = {**self.loaded_info(found), **extra}
        elif weights == "required":
            named = f" (model.loader.filename={self.filename})" if self.filename else ""
            raise WeightsNotFoundError(
                f"model.weights=required but no weights were found for model.source={source!r}"
                f"{named}: {found.reason}. Download them first (e.g. `{sources.hub_download()} "
                f"<hub id> {self.filename or ''} --local-dir <dir>`, with HF_ENDPOINT=<mirror url> "
                "where the hub is not reachable) and pass `model.source=<file or dir>`, or run "
                "`model.weights=auto` / `model.weights=random` to use the real architecture with "
                "random weights.")
        else:
            why = "model.weights=random" if found is None else found.reason
            if found is not None:
                log.warning("no weights for model.source=%s (%s); using a seeded random init "
                            "of the real architecture (model.weights=auto)", source, why)
            model, extra = self.random_init(seed, source, revision)
            info = {"kind": "random-init", "source": source, "digest": None, "init_seed": seed,
                    "reason": why, **extra}
        model = self.finish(model, info)
        info["num_params"] = tensor_count(model, buffers=False)
        return LoadedModel(model, info, time.perf_counter() - start)

    def build_meta(self, found: Any, init_seed: int) -> Any:
        """The model as :meth:`load` would build it, on the ``meta`` device."""
        if isinstance(found, sources.ResolvedSource) and found.kind == "dir" and self.class_path \
                and not self.pipeline:
            cls = import_class(self.class_path)
            if hasattr(cls, "load_config"):  # diffusers' ConfigMixin
                config = cls.load_config(str(found.path), subfolder=self.subfolder)
                with torch.device("meta"):
                    return cls.from_config(config)
        with torch.device("meta"), sources.hub_forced_offline():
            return self.load(None, "random", int(init_seed), None).module


def locate(loader: Any, source: str | None,
           revision: str | None) -> sources.ResolvedSource | sources.NotFound:
    """Where ``loader``'s weights for ``source`` are, without downloading (any loader object)."""
    return sources.resolve_source(source, sources.Layout.of(loader), revision, allow_network=False)
