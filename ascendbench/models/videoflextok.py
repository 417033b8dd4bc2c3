"""Loading VideoFlexTok (``config.json`` + ``model.safetensors``); docs/videoflextok.md."""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path
from typing import Any, Mapping

import torch
from huggingface_hub import hf_hub_download
from safetensors import safe_open

from ascendbench.config import plain
from ascendbench.errors import ConfigError, WeightsLoadError
from ascendbench.models.base import ModelLoader, import_class
from ascendbench.models.sources import ResolvedSource, hub_download, hub_offline, looks_like_hub_id

log = logging.getLogger(__name__)

VIDEOFLEXTOK_HINT = (
    "Install it from its repository without its pinned dependencies (it pins torch==2.8 and "
    "diffusers==0.20, which would replace this host's torch / torch_npu): "
    "`pip install --no-deps --no-build-isolation 'git+https://github.com/apple/ml-videoflextok'`, "
    "then `pip install einops mup`.")
_NOT_FOUND = object()


def transformer_depth(obj: Any) -> int:
    """Length of the longest ``blocks`` ModuleList among ``obj``'s submodules (0 if none)."""
    modules = obj.modules() if isinstance(obj, torch.nn.Module) else ()
    return max((len(m.blocks) for m in modules
                if isinstance(getattr(m, "blocks", None), torch.nn.ModuleList)), default=0)


_COMPUTED = {"@depth": transformer_depth, "@len": len}


def read_path(obj: Any, path: str) -> Any:
    """The value at the dotted ``path`` below ``obj``; a ``KeyError`` names a missing segment."""
    for segment in path.split("."):
        if segment in _COMPUTED:
            return _COMPUTED[segment](obj)
        if isinstance(obj, Mapping):
            obj = obj.get(segment, _NOT_FOUND)
        elif isinstance(obj, (list, tuple, torch.nn.ModuleList)) and segment.lstrip("-").isdigit():
            obj = obj[int(segment)] if -len(obj) <= int(segment) < len(obj) else _NOT_FOUND
        else:
            obj = getattr(obj, segment, _NOT_FOUND)
        if obj is _NOT_FOUND:
            raise KeyError(f"{segment!r} not found")
    return obj


def _normalise(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def check_expected(obj: Any, expect: Mapping[str, Any]) -> dict[str, Any]:
    """Every expected value against the instance (tensors as lists): ``{mismatches, checks}``.
    >>> check_expected({"a": {"b": (1, 2)}}, {"a.b": [1, 2], "a.c": 3})["mismatches"]
    1"""
    checks: dict[str, dict[str, Any]] = {}
    for path, expected in expect.items():
        try:
            actual = _normalise(read_path(obj, path))
        except KeyError as exc:
            checks[path] = {"expected": expected, "actual": None, "ok": False,
                            "error": f"path {path!r}: {exc.args[0]}"}
            continue
        ok = actual == _normalise(expected)
        checks[path] = {"expected": expected, "actual": actual, "ok": ok}
    return {"mismatches": sum(not c["ok"] for c in checks.values()), "checks": checks}


class VideoFlexTokLoader(ModelLoader):
    """Loads ``class_path`` with ``from_pretrained(<dir>)`` (``architecture``: random init)."""

    def __init__(self, class_path: str = "videoflextok.wrappers.VideoFlexTokFromHub",
                 install_hint: str = VIDEOFLEXTOK_HINT, expect: Mapping[str, Any] | None = None,
                 architecture: Mapping[str, Any] | None = None) -> None:
        self.class_path, self.install_hint = class_path, install_hint
        self.expect = plain(expect) or {}
        self.architecture = plain(architecture)

    def from_weights(self, found: ResolvedSource, seed: int) -> tuple[Any, dict]:
        """``from_pretrained`` of the directory, with the strict-load counts."""
        cls = import_class(self.class_path, self.install_hint)
        directory = found.path if found.kind == "dir" else found.path.parent
        log.info("loading %s.from_pretrained(%s)", cls.__name__, directory)
        try:
            module = cls.from_pretrained(str(directory), strict=False)
        except Exception as exc:  # hydra, safetensors and the model's own code raise many types
            raise WeightsLoadError(
                f"{self.class_path}.from_pretrained({str(directory)!r}) failed: "
                f"{type(exc).__name__}: {str(exc)[:400]}. Check that config.json and the "
                "safetensors file are complete and belong to this class, or run "
                "`model.weights=random`.") from exc
        return module, {"strict_load": strict_load_counts(module, found.files)}

    def random_init(self, seed: int, source: str | None, revision: str | None) -> tuple[Any, dict]:
        """The class built from ``architecture`` or the ``config.json`` found at ``source``."""
        cls = import_class(self.class_path, self.install_hint)
        config = read_config(source, revision) if self.architecture is None else self.architecture
        if config is None:
            raise ConfigError(
                f"a random initialisation of {self.class_path} needs its config.json, and none was "
                f"found for model.source={source!r}. Point model.source at a directory holding "
                f"config.json (`{hub_download()} <hub id> config.json --local-dir <dir>` "
                "fetches just that file) or give model.loader.architecture.")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            takes_config = "config" in inspect.signature(cls.__init__).parameters
            return (cls(config=config) if takes_config else cls(**config)), {}

    def finish(self, model: Any, info: dict[str, Any]) -> Any:
        """``config_checks`` of ``expect``, then eval mode."""
        info["config_checks"] = check_expected(model, self.expect) if self.expect else None
        return model.eval()


def read_config(source: str | None, revision: str | None = None) -> dict[str, Any] | None:
    """``config.json`` of a local directory, a local file's directory, or a hub id (cache first)."""
    path = Path(str(source)).expanduser()
    if source and path.exists():
        candidate = (path if path.is_dir() else path.parent) / "config.json"
        return json.loads(candidate.read_text()) if candidate.is_file() else None
    if not source or not looks_like_hub_id(str(source)):
        return None
    for local_only in [True] if hub_offline() else [True, False]:
        try:
            return json.loads(Path(hf_hub_download(str(source), "config.json", revision=revision,
                                                    local_files_only=local_only)).read_text())
        except Exception as exc:  # not cached / unreachable: try the next way, then give up
            log.debug("config.json of %s (local_only=%s): %s", source, local_only, exc)
    return None


def strict_load_counts(module: torch.nn.Module, files: tuple[Path, ...]) -> dict[str, Any]:
    """Keys the model has that the files lack and the reverse (tied weights are not missing)."""
    in_file: set[str] = set()
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            in_file.update(handle.keys())
    state = module.state_dict()

    def storage(key: str) -> tuple[int, int]:
        return (state[key].untyped_storage().data_ptr(), state[key].storage_offset())

    present = {storage(k) for k in state if k in in_file}
    return {"missing": sorted(k for k in state if k not in in_file and storage(k) not in present),
            "unexpected": sorted(k for k in in_file if k not in state),
            "tensors_in_file": len(in_file), "tensors_in_model": len(state)}
