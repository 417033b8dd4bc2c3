"""Loading a diffusers pipeline: a single file, a diffusers directory, or random-init components."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import torch

from ascendbench.config import plain
from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models import memory, sources
from ascendbench.models.base import ModelLoader, import_class
from ascendbench.models.tokenizer import build_tokenizer
from ascendbench.precision import TORCH_DTYPES

log = logging.getLogger(__name__)


def _diffusers(spec: Mapping[str, Any]) -> Any:
    return import_class(spec["class_path"]).from_config(dict(spec.get("config") or {}))


def _transformers(spec: Mapping[str, Any]) -> Any:
    config = import_class(spec["config_class"])(**dict(spec.get("config") or {}))
    return import_class(spec["class_path"])(config)


def _tokenizer(spec: Mapping[str, Any]) -> Any:
    return build_tokenizer(**{k: v for k, v in spec.items() if k != "kind"})


# kind -> (builder, keys it needs); diffusers and transformers components hold tensors
BUILDERS: dict[str, tuple[Callable[[Mapping[str, Any]], Any], tuple[str, ...]]] = {
    "diffusers": (_diffusers, ("class_path",)),
    "transformers": (_transformers, ("class_path", "config_class")),
    "tokenizer": (_tokenizer, ())}


def _checked(name: str, spec: Any) -> dict[str, Any]:
    spec = plain(spec)
    kind = spec.get("kind")
    if kind not in BUILDERS:
        raise ConfigError(
            f"model.loader.components.{name}.kind={kind!r} is not a known component kind; allowed: "
            f"{', '.join(BUILDERS)}. Give e.g. `kind: diffusers` with `class_path` and `config`.")
    needed = BUILDERS[kind][1]
    missing = [key for key in needed if not spec.get(key)]
    if missing:
        raise ConfigError(
            f"model.loader.components.{name} (kind {kind}) lacks {', '.join(missing)}; a {kind} "
            f"component needs {', '.join(needed)} (and `config`, the constructor arguments).")
    return spec


def build_component(name: str, spec: Mapping[str, Any], seed: int) -> Any:
    """One component with weights drawn from ``torch.manual_seed(seed)`` (global RNG restored)."""
    spec = _checked(name, spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        component = BUILDERS[spec["kind"]][0](spec)
    return component.eval() if isinstance(component, torch.nn.Module) else component


def build_components(specs: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """All components, each seeded with ``seed`` (so the result never depends on their order)."""
    return {name: build_component(name, specs[name], seed) for name in sorted(specs)}


def count_component_params(specs: Mapping[str, Any]) -> dict[str, int]:
    """Parameters and buffers of every tensor-holding component, counted on the ``meta`` device."""
    checked = {name: _checked(name, specs[name]) for name in sorted(specs)}
    counts = {name: memory.count_meta_params(lambda spec=spec: BUILDERS[spec["kind"]][0](spec))
              for name, spec in checked.items() if spec["kind"] != "tokenizer"}
    return {name: count for name, count in counts.items() if count}  # schedulers hold no tensors


@dataclass(eq=False)
class PipelineLoader(ModelLoader):
    """Loads a diffusers pipeline class; fields: the keys of ``model.loader`` (docs/models.md)."""

    pipeline: ClassVar[bool] = True

    class_path: str
    components: Mapping[str, Any] | None = None
    filename: str | None = None
    config: str | None = None
    config_repo: str | None = None
    offline: bool = False
    text_encoder: Mapping[str, Any] | None = None
    tokenizer: Mapping[str, Any] | None = None
    vae: Mapping[str, Any] | None = None
    lora: Mapping[str, Any] | None = None
    load_dtype: str = "float32"
    memory_check: bool = True
    tiny_twin: str | None = None
    install_hint: str | None = None
    objects: dict[str, dict[str, Any]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.load_dtype not in TORCH_DTYPES:
            raise ConfigError(f"model.loader.load_dtype={self.load_dtype!r} is not allowed; use "
                              f"one of {', '.join(TORCH_DTYPES)}.")
        self.components = plain(self.components) or {}
        self.config = str(self.config) if self.config else None
        self.offline, self.memory_check = bool(self.offline), bool(self.memory_check)
        given = {"text_encoder": self.text_encoder, "tokenizer": self.tokenizer, "vae": self.vae}
        self.objects = {name: plain(spec) for name, spec in given.items()
                        if spec and spec.get("source")}
        self.lora = plain(self.lora) if self.lora and self.lora.get("path") else None

    def load(self, source: str | None, weights: str = "auto", init_seed: int = 42,
             revision: str | None = None) -> Any:
        """As every loader; with ``offline`` under ``HF_HUB_OFFLINE=1`` throughout."""
        with sources.hub_forced_offline() if self.offline else contextlib.nullcontext():
            return super().load(source, weights, init_seed, revision)

    def _local_only(self) -> bool:
        return self.offline or sources.hub_offline()

    def _check_memory(self, what: str, parts: Mapping[str, int], basis: str) -> dict | None:
        if not self.memory_check:
            return None
        twin = (f"Run the tiny twin with the same classes, `model={self.tiny_twin}`."
                if self.tiny_twin else "Use a smaller architecture in model.loader.components.")
        hint = f"{twin} Half precision halves the estimate: `model.loader.load_dtype=bfloat16`."
        estimate = memory.MemoryEstimate(what, dict(parts), self.load_dtype, basis)
        return memory.check_host_memory(estimate, hint)

    def random_init(self, seed: int, source: str | None, revision: str | None) -> tuple[Any, dict]:
        """The pipeline built from ``components`` after the memory check."""
        if not self.components:
            raise WeightsNotFoundError(
                f"{self.class_path} has no weights at model.source={source!r} and "
                "model.loader.components is empty, so it cannot be built with random weights "
                "either. Point model.source at the checkpoint.")
        checked = self._check_memory(f"random-init {self.class_path}",
                                     count_component_params(self.components),
                                     "architecture config on the meta device")
        components = build_components(self.components, seed)
        tokenizer, encoder = components.get("tokenizer"), components.get("text_encoder")
        config = getattr(encoder, "config", None)
        vocab = getattr(config, "vocab_size", None) or getattr(
            getattr(config, "text_config", None), "vocab_size", None)
        if tokenizer is not None and vocab is not None and len(tokenizer) > int(vocab):
            raise ConfigError(
                f"the in-memory tokenizer has {len(tokenizer)} tokens but the text encoder's "
                f"vocab_size is {vocab}; raise model.loader.components.text_encoder.config "
                f"vocab_size to at least {len(tokenizer)}.")
        pipe = import_class(self.class_path)(**components)
        pipe.to(dtype=TORCH_DTYPES[self.load_dtype])
        return pipe, {"loader": "components", "memory_check": checked}

    def from_weights(self, found: sources.ResolvedSource, seed: int) -> tuple[Any, dict]:
        """``from_single_file`` or ``from_pretrained``, after the memory check from the headers."""
        extra = {name: memory.safetensors_numel(_object_files(spec))
                 for name, spec in self.objects.items()}
        checked = self._check_memory(f"{self.class_path} from {found.path.name}",
                                     {"checkpoint": memory.safetensors_numel(found.files), **extra},
                                     "safetensors headers")
        cls = import_class(self.class_path)
        objects = {name: self._load_object(name, spec) for name, spec in self.objects.items()}
        dtype, how = TORCH_DTYPES[self.load_dtype], "from_pretrained" if found.kind == "dir" else \
            "from_single_file"
        try:
            if found.kind == "dir":
                pipe = cls.from_pretrained(str(found.path), dtype=dtype, local_files_only=True,
                                           use_safetensors=True, **objects)
            else:
                pipe = cls.from_single_file(str(found.path), dtype=dtype, **self._config_kwargs(),
                                            local_files_only=self._local_only(), **objects)
        except (ConfigError, WeightsLoadError):
            raise
        except Exception as exc:  # diffusers raises ValueError, OSError, ...
            raise WeightsLoadError(
                f"{self.class_path} could not be loaded from {found.path} ({how}): "
                f"{type(exc).__name__}: {str(exc)[:500]}. Check that model.loader.config holds "
                "this pipeline's diffusers configs and that model.loader.text_encoder points at "
                "its text encoder, or run `model.weights=random`.") from exc
        objects = {k: dict(v) for k, v in self.objects.items()}
        return pipe, {"loader": how, "config": self.config, "offline": self._local_only(),
                      "memory_check": checked, "objects": objects}

    def finish(self, model: Any, info: dict[str, Any]) -> Any:
        """LoRA weights where configured; diffusers' own progress bars off."""
        if self.lora:
            info["lora"] = self._apply_lora(model)
        model.set_progress_bar_config(disable=True)
        return model

    def _config_kwargs(self) -> dict[str, Any]:
        """``config=`` for ``from_single_file``: a local diffusers directory (required offline)."""
        path = Path(os.path.expanduser(self.config)) if self.config else None
        if path is not None and path.is_dir() and (path / "model_index.json").is_file():
            return {"config": str(path)}
        if self._local_only() or (path is not None and (
                path.exists() or not sources.looks_like_hub_id(self.config))):
            given = (f"model.loader.config={self.config!r} is not a local diffusers-format "
                     "directory (no model_index.json)" if self.config
                     else "model.loader.config is not set")
            raise ConfigError(
                f"{given}, but {self.class_path}.from_single_file needs the pipeline's diffusers "
                "configs and offline (model.loader.offline=true or HF_HUB_OFFLINE=1) they cannot "
                "be downloaded -- diffusers would otherwise fetch them from the hub silently. On a "
                f"connected machine run `{sources.hub_download()} "
                f"{self.config_repo or '<the pipeline family repository>'} --include '*.json' "
                "'tokenizer/*' --local-dir ./pipeline-config`, copy the directory here and pass "
                "`model.loader.config=./pipeline-config`.")
        if path is None:
            log.warning("model.loader.config is not set: diffusers will download %s's configs from "
                        "the hub", self.class_path)
            return {}
        return {"config": self.config}

    def _load_object(self, name: str, spec: Mapping[str, Any]) -> Any:
        cls = import_class(spec["class_path"])
        dtype = {} if name == "tokenizer" else {"dtype": TORCH_DTYPES[self.load_dtype]}
        try:
            return cls.from_pretrained(os.path.expanduser(str(spec["source"])), **dtype,
                                       subfolder=spec.get("subfolder"),
                                       local_files_only=self._local_only())
        except Exception as exc:  # transformers raises OSError/ValueError for missing files
            raise WeightsLoadError(
                f"model.loader.{name} could not be loaded from source={spec['source']!r} subfolder="
                f"{spec.get('subfolder')!r} with {spec['class_path']}: {type(exc).__name__}: "
                f"{str(exc)[:300]}. Point model.loader.{name}.source at a local directory holding "
                f"it{' (offline: nothing is downloaded)' if self._local_only() else ''}.") from exc

    def _apply_lora(self, pipe: Any) -> dict[str, Any]:
        if importlib.util.find_spec("peft") is None:
            raise ConfigError(
                f"model.loader.lora.path={self.lora['path']!r} needs the peft package to load LoRA "
                "weights; install it with `pip install peft` (or `pip install "
                "ascendbench[pipelines]`), or drop model.loader.lora.")
        name, scale = self.lora.get("adapter_name") or "lora", float(self.lora.get("scale", 1.0))
        kwargs = {"weight_name": self.lora["weight_name"]} if self.lora.get("weight_name") else {}
        try:
            pipe.load_lora_weights(self.lora["path"], adapter_name=name,
                                   local_files_only=self._local_only(), **kwargs)
            pipe.set_adapters([name], adapter_weights=[scale])
        except Exception as exc:  # diffusers/peft raise ValueError, OSError, KeyError
            raise WeightsLoadError(
                f"LoRA weights model.loader.lora.path={self.lora['path']!r} could not be loaded "
                f"into {self.class_path}: {type(exc).__name__}: {str(exc)[:300]}.") from exc
        path = Path(self.lora["path"])
        files = (path,) if path.is_file() else tuple(sorted(path.glob("*.safetensors")))
        return {"path": str(path), "adapter_name": name, "scale": scale,
                "digest": sources.files_digest(files) if files else None}


def _object_files(spec: Mapping[str, Any]) -> tuple[Path, ...]:
    layout = sources.Layout(spec.get("subfolder"), allow_pickle=True)
    found = sources.resolve_source(str(spec["source"]), layout, allow_network=False)
    return tuple(f for f in getattr(found, "files", ()) if f.suffix == ".safetensors")
