"""Loading VideoFlexTok (``videoflextok.wrappers.VideoFlexTokFromHub``) and its kin.

The class is a ``huggingface_hub.PyTorchModelHubMixin``: a directory (or hub repository) holds
``config.json`` -- a Hydra config the class instantiates -- and ``model.safetensors``. The external
``videoflextok`` package is imported only when this loader runs, with an install hint when missing.

Besides what :class:`ascendbench.models.DiffusersLoader` records, this loader writes two checks of
the seed report into ``weights``:

* ``strict_load``: keys of the model missing from the file and keys of the file the model does not
  have (``from_pretrained`` itself loads non-strictly and would stay silent);
* ``config_checks``: the values of ``model.loader.expect`` (attribute paths -> expected values, e.g.
  decoder depth, FSQ levels, codebook size) read back from the instance.

Random initialisation (``model.weights=random``, the gates' control) builds the class from the
``config.json`` found at ``model.source`` -- only that small file is needed -- or from
``model.loader.architecture``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from ascendbench.errors import ConfigError, MissingPackageError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.base import ModelLoader
from ascendbench.models.expect import check_expected
from ascendbench.models.loader import WEIGHTS_MODES, LoadedModel, _loaded_info, _not_found_message
from ascendbench.models.sources import ResolvedSource, hub_offline, looks_like_hub_id, resolve_source

log = logging.getLogger(__name__)

VIDEOFLEXTOK_HINT = (
    "Install it from its repository without its pinned dependencies (it pins torch==2.8 and "
    "diffusers==0.20, which would replace this host's torch / torch_npu): "
    "`pip install --no-deps --no-build-isolation 'git+https://github.com/apple/ml-videoflextok'`, then "
    "`pip install einops mup`."
)


class VideoFlexTokLoader(ModelLoader):
    """Loads a ``PyTorchModelHubMixin`` tokenizer with ``from_pretrained(<dir or hub id>)``.

    Args:
        class_path: dotted path of the class (default VideoFlexTok's hub wrapper).
        install_hint: what to tell the user when the class's package is missing.
        expect: attribute path -> value that must have landed in the instance (see
            :func:`ascendbench.models.expect.check_expected`).
        architecture: the ``config.json`` content to use for random init when none is found.
    """

    def __init__(self, class_path: str = "videoflextok.wrappers.VideoFlexTokFromHub",
                 install_hint: str = VIDEOFLEXTOK_HINT, expect: Mapping[str, Any] | None = None,
                 architecture: Mapping[str, Any] | None = None) -> None:
        self.class_path = class_path
        self.install_hint = install_hint
        self.expect = _plain(expect) or {}
        self.architecture = _plain(architecture)

    def import_class(self) -> type:
        """The model class, imported now; a :class:`MissingPackageError` with the hint if absent."""
        module_name, _, attr = self.class_path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise MissingPackageError(
                f"model.loader.class_path={self.class_path!r} needs the package "
                f"{(exc.name or module_name).split('.')[0]!r}, which is not installed. {self.install_hint}"
            ) from exc
        if not hasattr(module, attr):
            raise ConfigError(f"model.loader.class_path={self.class_path!r}: module {module_name} has no "
                              f"{attr!r}; give the full dotted path of the model class.")
        return getattr(module, attr)

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> LoadedModel:
        """Load per ``model.weights`` (auto | required | random); see the module docstring."""
        if weights not in WEIGHTS_MODES:
            raise ConfigError(f"model.weights={weights!r} is not allowed; use one of {', '.join(WEIGHTS_MODES)}.")
        cls = self.import_class()
        start = time.perf_counter()
        found = None if weights == "random" else resolve_source(source, None, revision)
        if isinstance(found, ResolvedSource):
            module, info = self._load(cls, _directory(found)), _loaded_info(found)
            info["strict_load"] = strict_load_counts(module, found.files)
        elif weights == "required":
            raise WeightsNotFoundError(_not_found_message(source, found))
        else:
            why = "model.weights=random" if found is None else found.reason
            module, info = self._random(cls, source, revision, int(init_seed), why)
        info["config_checks"] = check_expected(module, self.expect) if self.expect else None
        info["num_params"] = sum(p.numel() for p in module.parameters())
        return LoadedModel(module.eval(), info, time.perf_counter() - start)

    def _load(self, cls: type, directory: Path) -> torch.nn.Module:
        log.info("loading %s.from_pretrained(%s)", cls.__name__, directory)
        try:
            return cls.from_pretrained(str(directory), strict=False)
        except Exception as exc:  # hydra, safetensors and the model's own code raise many types
            raise WeightsLoadError(
                f"{self.class_path}.from_pretrained({str(directory)!r}) failed: {type(exc).__name__}: "
                f"{str(exc)[:400]}. Check that config.json and the safetensors file are complete and "
                "belong to this class, or run `model.weights=random`."
            ) from exc

    def _random(self, cls: type, source: str | None, revision: str | None, seed: int, why: str):
        config = self.architecture if self.architecture is not None else read_config(source, revision)
        if config is None:
            raise ConfigError(
                f"a random initialisation of {self.class_path} needs its config.json, and none was found for "
                f"model.source={source!r} ({why}). Point model.source at a directory holding config.json "
                "(`huggingface-cli download <hub id> config.json --local-dir <dir>` fetches just that file) "
                "or give model.loader.architecture."
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            takes_config = "config" in inspect.signature(cls.__init__).parameters
            module = cls(config=config) if takes_config else cls(**config)
        info = {"kind": "random-init", "source": source, "digest": None, "init_seed": seed, "reason": why}
        return module, info


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


def _directory(found: ResolvedSource) -> Path:
    return found.path if found.kind == "dir" else found.path.parent


def read_config(source: str | None, revision: str | None = None) -> dict[str, Any] | None:
    """``config.json`` of a local directory, a local file's directory, or a hub id (cache first)."""
    if not source:
        return None
    path = Path(str(source)).expanduser()
    if path.exists():
        candidate = (path if path.is_dir() else path.parent) / "config.json"
        return json.loads(candidate.read_text()) if candidate.is_file() else None
    if not looks_like_hub_id(str(source)):
        return None
    from huggingface_hub import hf_hub_download

    for local_only in ([True] if hub_offline() else [True, False]):
        try:
            return json.loads(Path(hf_hub_download(str(source), "config.json", revision=revision,
                                                    local_files_only=local_only)).read_text())
        except Exception as exc:  # not cached / unreachable: try the next way, then give up
            log.debug("config.json of %s (local_only=%s): %s", source, local_only, exc)
    return None


def strict_load_counts(module: torch.nn.Module, files: tuple[Path, ...]) -> dict[str, Any]:
    """Keys the model has that the files lack (``missing``) and the reverse (``unexpected``).

    Keys of the state dict that share storage with a key present in the files (tied weights, saved
    once by safetensors) are not counted as missing.
    """
    from safetensors import safe_open

    in_file: set[str] = set()
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            in_file.update(handle.keys())
    state = module.state_dict()
    present_storage = {_storage_key(state[k]) for k in state if k in in_file}
    missing = sorted(k for k in state if k not in in_file and _storage_key(state[k]) not in present_storage)
    unexpected = sorted(k for k in in_file if k not in state)
    return {"missing": missing, "unexpected": unexpected, "tensors_in_file": len(in_file),
            "tensors_in_model": len(state)}


def _storage_key(tensor: torch.Tensor) -> tuple[int, int]:
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
