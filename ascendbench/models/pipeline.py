"""Loading a diffusers pipeline: one single file, a diffusers-format directory, or random-init components.

``model.source`` may be

* a single ``.safetensors`` checkpoint (or a directory / hub repository holding ``model.loader.filename``):
  ``<class>.from_single_file`` -- how LTX-Video and Sulphur-2 ship;
* a diffusers-format directory or hub repository (``model_index.json``): ``<class>.from_pretrained``.

``from_single_file`` needs the pipeline's diffusers configs; given none, diffusers silently downloads
them from the hub. ``model.loader.config`` points at a local diffusers-format directory (its
``model_index.json``, component ``config.json`` files, tokenizer and scheduler files) and
``model.loader.offline=true`` guarantees no network: it requires that directory (clear error
otherwise), passes ``local_files_only=True`` everywhere and sets ``HF_HUB_OFFLINE=1``. Components not
in the checkpoint (the text encoder) come from ``model.loader.text_encoder`` (loaded separately and
passed as an object) or from the config directory.

Without weights (``model.weights=random``, or ``auto`` when none are found) the pipeline is built from
``model.loader.components`` (:mod:`ascendbench.models.components`), after the memory check has
estimated its size on the meta device. The pipeline is returned on the CPU in ``load_dtype``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.base import ModelLoader
from ascendbench.models.components import build_components, count_component_params, plain
from ascendbench.models.loader import WEIGHTS_MODES, LoadedModel, count_params, import_class
from ascendbench.models.memory import MemoryEstimate, check_host_memory, safetensors_numel
from ascendbench.models.sources import NotFound, files_digest, files_digests, hub_offline, looks_like_hub_id
from ascendbench.precision import TORCH_DTYPES

log = logging.getLogger(__name__)

HUB_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*")


@dataclass(frozen=True)
class PipelineSource:
    """Weights found: ``kind`` is ``file`` (single file) or ``dir`` (diffusers format)."""

    kind: str
    path: Path
    origin: str
    files: tuple[Path, ...]


def enforce_offline() -> None:
    """``HF_HUB_OFFLINE=1`` for this process (huggingface_hub reads it at import) and its children."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import huggingface_hub.constants as hub_constants

    hub_constants.HF_HUB_OFFLINE = True


@dataclass(eq=False)
class PipelineLoader(ModelLoader):
    """Loads a diffusers pipeline class (``from_single_file`` / ``from_pretrained`` / components).

    A dataclass whose fields are the keys of ``model.loader`` (Hydra builds it by ``_target_``).

    Attributes:
        class_path: the pipeline class, e.g. ``diffusers.LTXPipeline`` or ``diffusers.LTX2Pipeline``.
        components: component name -> architecture spec, for random init (see
            :mod:`ascendbench.models.components`).
        filename: the single-file checkpoint inside a directory or hub repository given as source
            (e.g. ``sulphur_dev_bf16.safetensors``; its fp8-mixed sibling is another file name).
        config: local diffusers-format directory (or hub id) with the pipeline's configs, for
            ``from_single_file``.
        config_repo: the hub repository those configs come from (named in the offline error).
        offline: no network at all (needs ``config`` to be a local directory).
        text_encoder: ``{class_path, source, subfolder}`` loaded with ``from_pretrained`` and passed
            as an object (``null``: taken from the config directory).
        tokenizer: like ``text_encoder``, for the tokenizer.
        lora: ``{path, weight_name, adapter_name, scale}``: LoRA weights loaded with
            ``load_lora_weights`` (needs peft); ``None`` after building when no path is set.
        load_dtype: dtype the pipeline is loaded in (``float32`` for a reference-grade CPU copy).
        memory_check: refuse before allocating when the parameters would not fit in host memory.
        tiny_twin: the model option suggested when refusing (e.g. ``tiny_ltx_t2v``).
        objects: (derived) the separately loaded components with a ``source``: ``text_encoder``,
            ``tokenizer``.
    """

    class_path: str
    components: Mapping[str, Any] | None = None
    filename: str | None = None
    config: str | None = None
    config_repo: str | None = None
    offline: bool = False
    text_encoder: Mapping[str, Any] | None = None
    tokenizer: Mapping[str, Any] | None = None
    lora: Mapping[str, Any] | None = None
    load_dtype: str = "float32"
    memory_check: bool = True
    tiny_twin: str | None = None
    objects: dict[str, dict[str, Any]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.load_dtype not in TORCH_DTYPES:
            raise ConfigError(f"model.loader.load_dtype={self.load_dtype!r} is not allowed; use one of "
                              f"{', '.join(TORCH_DTYPES)}.")
        self.components = plain(self.components) or {}
        self.config = str(self.config) if self.config else None
        self.offline = bool(self.offline)
        self.objects = {name: plain(spec) for name, spec in (("text_encoder", self.text_encoder),
                                                              ("tokenizer", self.tokenizer))
                        if spec and spec.get("source")}
        self.lora = plain(self.lora) if self.lora and self.lora.get("path") else None
        self.memory_check = bool(self.memory_check)

    # -- entry point -------------------------------------------------------------------------------

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> LoadedModel:
        """Load per ``model.weights`` (``auto`` | ``required`` | ``random``)."""
        if weights not in WEIGHTS_MODES:
            raise ConfigError(f"model.weights={weights!r} is not allowed; use one of {', '.join(WEIGHTS_MODES)}.")
        if self.offline:
            enforce_offline()
        cls = import_class(self.class_path)
        start = time.perf_counter()
        if weights == "random":
            pipe, info = self._random(cls, init_seed, source, "model.weights=random")
        else:
            found = self.resolve(source, revision)
            if isinstance(found, PipelineSource):
                pipe, info = self._load(cls, found)
            elif weights == "required":
                raise WeightsNotFoundError(_not_found(source, found, self.filename))
            else:
                log.warning("no weights for model.source=%s (%s); building %s from model.loader.components with "
                            "seeded random weights (model.weights=auto)", source, found.reason, self.class_path)
                pipe, info = self._random(cls, init_seed, source, found.reason)
        if self.lora:
            info["lora"] = self._apply_lora(pipe)
        info["num_params"] = count_params(pipe)
        pipe.set_progress_bar_config(disable=True)
        return LoadedModel(pipe, info, time.perf_counter() - start)

    # -- where the weights are ---------------------------------------------------------------------

    def resolve(self, source: str | None, revision: str | None = None) -> PipelineSource | NotFound:
        """Find the checkpoint: a local file/directory, or a hub repository (cache first)."""
        if not source:
            return NotFound("model.source is empty")
        path = Path(os.path.expanduser(str(source)))
        if path.exists():
            return self._local(path, "local")
        if not looks_like_hub_id(str(source)):
            return NotFound(f"the local path {path} does not exist")
        return self._hub(str(source), revision)

    def _local(self, path: Path, origin: str) -> PipelineSource | NotFound:
        if path.is_file():
            if path.suffix != ".safetensors":
                return NotFound(f"{path} is not a .safetensors file")
            return PipelineSource("file", path.resolve(), f"{origin} file", (path.resolve(),))
        if self.filename and (path / self.filename).is_file():
            file = (path / self.filename).resolve()
            return PipelineSource("file", file, f"{origin} file in {path}", (file,))
        if (path / "model_index.json").is_file():
            return PipelineSource("dir", path.resolve(), f"{origin} diffusers directory",
                                  tuple(sorted(path.rglob("*.safetensors"))))
        wanted = f"{self.filename} or " if self.filename else ""
        return NotFound(f"{path} holds neither {wanted}a diffusers model_index.json")

    def _hub(self, repo_id: str, revision: str | None) -> PipelineSource | NotFound:
        from huggingface_hub import hf_hub_download, snapshot_download

        attempts = [True] if (self.offline or hub_offline()) else [True, False]
        reasons = []
        for local_only in attempts:
            try:
                if self.filename:
                    file = Path(hf_hub_download(repo_id, self.filename, revision=revision, local_files_only=local_only))
                    return PipelineSource("file", file, f"hub {repo_id}", (file,))
                snapshot = snapshot_download(repo_id, revision=revision, allow_patterns=list(HUB_PATTERNS),
                                             local_files_only=local_only)
                found = self._local(Path(snapshot), f"hub {repo_id}")
                if isinstance(found, PipelineSource):
                    return found
                reasons.append(found.reason)
            except Exception as exc:  # huggingface_hub raises many unrelated types for "not there"
                reasons.append("not in the local hub cache" if local_only else f"hub: {type(exc).__name__}")
        mode = "offline, nothing cached" if len(attempts) == 1 else "cache and hub both failed"
        return NotFound(f"hub id {repo_id!r}: {mode} ({'; '.join(reasons)})")

    # -- building ----------------------------------------------------------------------------------

    def _hint(self) -> str:
        twin = f"Run the tiny twin with the same classes, `model={self.tiny_twin}`." if self.tiny_twin else \
            "Use a smaller architecture in model.loader.components."
        return f"{twin} Half precision halves the estimate: `model.loader.load_dtype=bfloat16`."

    def _check_memory(self, what: str, parts: Mapping[str, int], basis: str) -> dict[str, Any] | None:
        if not self.memory_check:
            return None
        estimate = MemoryEstimate(what, dict(parts), self.load_dtype, basis=basis)
        return check_host_memory(estimate, self._hint())

    def _random(self, cls: type, seed: int, source: str | None, why: str) -> tuple[Any, dict[str, Any]]:
        if not self.components:
            raise WeightsNotFoundError(
                f"{self.class_path} has no weights to load ({why}) and model.loader.components is empty, so it "
                "cannot be built with random weights either. Point model.source at the checkpoint."
            )
        memory = self._check_memory(f"random-init {self.class_path}", count_component_params(self.components),
                                    "architecture config on the meta device")
        components = build_components(self.components, seed)
        _check_vocab(components)
        pipe = cls(**components)
        pipe.to(dtype=TORCH_DTYPES[self.load_dtype])
        info = {"kind": "random-init", "source": source, "digest": None, "init_seed": int(seed), "reason": why,
                "loader": "components", "memory_check": memory}
        return pipe, info

    def _load(self, cls: type, found: PipelineSource) -> tuple[Any, dict[str, Any]]:
        extra = {name: safetensors_numel(_object_files(spec)) for name, spec in self.objects.items()}
        memory = self._check_memory(f"{self.class_path} from {found.path.name}",
                                    {"checkpoint": safetensors_numel(found.files), **extra}, "safetensors headers")
        objects = {name: self._load_object(name, spec) for name, spec in self.objects.items()}
        dtype = TORCH_DTYPES[self.load_dtype]
        local_only = self.offline or hub_offline()
        try:
            if found.kind == "dir":
                pipe = cls.from_pretrained(str(found.path), dtype=dtype, local_files_only=True,
                                           use_safetensors=True, **objects)
            else:
                pipe = cls.from_single_file(str(found.path), dtype=dtype, local_files_only=local_only,
                                            **self._config_kwargs(), **objects)
        except (ConfigError, WeightsLoadError):
            raise
        except Exception as exc:  # diffusers raises ValueError, OSError, SingleFileComponentError...
            raise WeightsLoadError(
                f"{self.class_path} could not be loaded from {found.path} "
                f"({'from_pretrained' if found.kind == 'dir' else 'from_single_file'}): {type(exc).__name__}: "
                f"{str(exc)[:500]}. Check that model.loader.config holds this pipeline's diffusers configs and "
                "that model.loader.text_encoder points at its text encoder, or run `model.weights=random`."
            ) from exc
        digest, sha256sum, sizes = files_digests(found.files)  # one read: the digest and each file's sha256sum
        info = {"kind": "loaded", "source": str(found.path), "origin": found.origin, "digest": digest,
                "sha256sum": sha256sum, "file_bytes": sizes, "files": [p.name for p in found.files],
                "loader": "from_pretrained" if found.kind == "dir" else "from_single_file",
                "config": self.config, "offline": self.offline or hub_offline(), "memory_check": memory,
                "objects": {name: dict(spec) for name, spec in self.objects.items()}}
        return pipe, info

    def _config_kwargs(self) -> dict[str, Any]:
        """``config=`` for ``from_single_file``: a local diffusers directory (required offline) or hub id."""
        if self.config is None:
            if self.offline or hub_offline():
                raise ConfigError(_config_missing(None, self.class_path, self.config_repo))
            log.warning("model.loader.config is not set: diffusers will download %s's configs from the hub",
                        self.class_path)
            return {}
        path = Path(os.path.expanduser(self.config))
        if path.is_dir() and (path / "model_index.json").is_file():
            return {"config": str(path)}
        if self.offline or hub_offline() or path.exists() or not looks_like_hub_id(self.config):
            raise ConfigError(_config_missing(self.config, self.class_path, self.config_repo))
        return {"config": self.config}

    def _load_object(self, name: str, spec: Mapping[str, Any]) -> Any:
        cls = import_class(spec["class_path"])
        local_only = self.offline or hub_offline()
        try:
            source = os.path.expanduser(str(spec["source"]))
            return cls.from_pretrained(source, subfolder=spec.get("subfolder"), local_files_only=local_only,
                                       **({"dtype": TORCH_DTYPES[self.load_dtype]} if name != "tokenizer" else {}))
        except Exception as exc:  # transformers raises OSError/ValueError for missing files
            raise WeightsLoadError(
                f"model.loader.{name} could not be loaded from source={spec['source']!r} subfolder="
                f"{spec.get('subfolder')!r} with {spec['class_path']}: {type(exc).__name__}: {str(exc)[:300]}. "
                f"Point model.loader.{name}.source at a local directory holding it"
                f"{' (offline: nothing is downloaded)' if local_only else ''}."
            ) from exc

    def _apply_lora(self, pipe: Any) -> dict[str, Any]:
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            raise ConfigError(
                f"model.loader.lora.path={self.lora['path']!r} needs the peft package to load LoRA weights; "
                "install it with `pip install peft` (or `pip install ascendbench[pipelines]`), or drop "
                "model.loader.lora."
            )
        name, scale = self.lora.get("adapter_name") or "lora", float(self.lora.get("scale", 1.0))
        kwargs = {"weight_name": self.lora["weight_name"]} if self.lora.get("weight_name") else {}
        try:
            pipe.load_lora_weights(self.lora["path"], adapter_name=name,
                                   local_files_only=self.offline or hub_offline(), **kwargs)
            pipe.set_adapters([name], adapter_weights=[scale])
        except Exception as exc:  # diffusers/peft raise ValueError, OSError, KeyError
            raise WeightsLoadError(
                f"LoRA weights model.loader.lora.path={self.lora['path']!r} could not be loaded into "
                f"{self.class_path}: {type(exc).__name__}: {str(exc)[:300]}."
            ) from exc
        path = Path(self.lora["path"])
        files = (path,) if path.is_file() else tuple(sorted(path.glob("*.safetensors"))) if path.is_dir() else ()
        return {"path": str(path), "adapter_name": name, "scale": scale,
                "digest": files_digest(files) if files else None}


def _object_files(spec: Mapping[str, Any]) -> tuple[Path, ...]:
    """The safetensors files of a separately loaded component, where they are on disk already (local
    directory or hub cache); a component still to be downloaded is not counted."""
    source, subfolder = os.path.expanduser(str(spec["source"])), spec.get("subfolder") or ""
    root = Path(source) / subfolder
    if not Path(source).exists() and looks_like_hub_id(str(spec["source"])):
        from huggingface_hub import snapshot_download

        try:
            root = Path(snapshot_download(str(spec["source"]), allow_patterns=[f"{subfolder}/*.safetensors" if subfolder
                                                                             else "*.safetensors"],
                                          local_files_only=True)) / subfolder
        except Exception:  # not cached: nothing to count yet
            return ()
    return tuple(sorted(root.glob("*.safetensors"))) if root.is_dir() else ()


def _check_vocab(components: Mapping[str, Any]) -> None:
    tokenizer, encoder = components.get("tokenizer"), components.get("text_encoder")
    vocab = getattr(getattr(encoder, "config", None), "vocab_size", None)
    if vocab is None:
        vocab = getattr(getattr(getattr(encoder, "config", None), "text_config", None), "vocab_size", None)
    if tokenizer is not None and vocab is not None and len(tokenizer) > int(vocab):
        raise ConfigError(
            f"the in-memory tokenizer has {len(tokenizer)} tokens but the text encoder's vocab_size is {vocab}; "
            f"raise model.loader.components.text_encoder.config vocab_size to at least {len(tokenizer)}."
        )


def _config_missing(config: str | None, class_path: str, repo: str | None) -> str:
    given = f"model.loader.config={config!r} is not a local diffusers-format directory (no model_index.json)" \
        if config else "model.loader.config is not set"
    return (
        f"{given}, but {class_path}.from_single_file needs the pipeline's diffusers configs and offline "
        "(model.loader.offline=true or HF_HUB_OFFLINE=1) they cannot be downloaded -- diffusers would otherwise "
        f"fetch them from the hub silently. On a connected machine run `huggingface-cli download "
        f"{repo or '<the pipeline family repository>'} --include '*.json' 'tokenizer/*' "
        "--local-dir ./pipeline-config`, "
        "copy the directory here and pass `model.loader.config=./pipeline-config`."
    )


def _not_found(source: str | None, found: NotFound, filename: str | None) -> str:
    file_hint = f" (model.loader.filename={filename})" if filename else ""
    return (
        f"model.weights=required but no pipeline checkpoint was found for model.source={source!r}{file_hint}: "
        f"{found.reason}. Download it first (e.g. `huggingface-cli download <hub id> {filename or ''} --local-dir "
        "<dir>`, with HF_ENDPOINT=<mirror url> where the hub is not reachable) and pass `model.source=<file or "
        "dir>`, or run `model.weights=random` to build the architecture with random weights."
    )
