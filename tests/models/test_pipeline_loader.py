"""PipelineLoader: the tiny LTX pipeline built offline, saved as users get theirs, loaded back.

The module fixture writes the tiny twin three ways: a diffusers-format directory (``full/``), one
original-layout single file (``tiny_ltx_t2v.safetensors``, as Lightricks ships LTX-Video) and a
config-only directory (``config/``, the ``*.json`` + tokenizer files users download for offline
``from_single_file``).
"""

from __future__ import annotations

import shutil

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.base import locate
from ascendbench.models.ltx_layout import save_ltx_single_file
from ascendbench.models.sources import hub_download


def _loader(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny_ltx_t2v", *overrides])
    GlobalHydra.instance().clear()
    return instantiate(cfg.model.loader)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_ltx_t2v")
    pipe = _loader().load(None, "random", 42).module
    pipe.save_pretrained(root / "full")
    save_ltx_single_file(pipe, root / "tiny_ltx_t2v.safetensors")
    shutil.copytree(root / "full", root / "config", ignore=shutil.ignore_patterns("*.safetensors"))
    return root, pipe


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_random_init_is_the_real_classes_seeded(tiny):
    _, pipe = tiny
    again = _loader().load(None, "random", 42)
    assert type(again.module).__name__ == "LTXPipeline"
    assert {type(c).__name__ for c in again.module.components.values()} >= {
        "LTXVideoTransformer3DModel", "AutoencoderKLLTXVideo", "T5EncoderModel", "T5Tokenizer",
        "FlowMatchEulerDiscreteScheduler"}
    assert _same(again.module.transformer, pipe.transformer)
    assert _same(again.module.text_encoder, pipe.text_encoder)
    assert not _same(_loader().load(None, "random", 43).module.transformer, pipe.transformer)
    info = again.weights
    assert info["kind"] == "random-init" and info["init_seed"] == 42
    assert info["loader"] == "components"
    assert info["num_params"] == sum(p.numel() for name in ("transformer", "vae", "text_encoder")
                                     for p in getattr(again.module, name).parameters())


def test_single_file_offline_with_local_config_and_text_encoder_object(tiny, offline):
    root, pipe = tiny
    loader = _loader(f"model.loader.config={root / 'config'}", "model.loader.offline=true",
                     f"model.loader.text_encoder.source={root / 'full'}")
    loaded = loader.load(str(root / "tiny_ltx_t2v.safetensors"), "required", 42)
    for name in ("transformer", "vae", "text_encoder"):
        assert _same(getattr(loaded.module, name), getattr(pipe, name)), name
    info = loaded.weights
    assert info["kind"] == "loaded" and info["loader"] == "from_single_file"
    assert info["offline"] is True
    assert info["digest"].startswith("sha256:") and info["files"] == ["tiny_ltx_t2v.safetensors"]
    assert info["objects"]["text_encoder"]["source"] == str(root / "full")
    assert info["memory_check"]["basis"] == "safetensors headers"
    assert info["memory_check"]["parts"]["text_encoder"] > 0


def test_a_directory_holding_the_file_resolves_by_filename(tiny, offline):
    root, _ = tiny
    loader = _loader(f"model.loader.config={root / 'config'}",
                     f"model.loader.text_encoder.source={root / 'full'}")
    found = locate(loader, str(root), None)
    assert found.kind == "file" and found.path.name == "tiny_ltx_t2v.safetensors"


def test_diffusers_directory_loads_with_from_pretrained(tiny, offline):
    root, pipe = tiny
    loaded = _loader("model.loader.filename=null").load(str(root / "full"), "required", 42)
    assert loaded.weights["loader"] == "from_pretrained"
    assert _same(loaded.module.transformer, pipe.transformer)
    loader = _loader("model.loader.filename=null", "model.loader.load_dtype=bfloat16")
    half = loader.load(str(root / "full"), "required", 42)
    assert half.module.transformer.dtype == half.module.text_encoder.dtype == torch.bfloat16


def test_offline_without_a_local_config_is_refused_before_diffusers_downloads(tiny, offline):
    root, _ = tiny
    loader = _loader("model.loader.offline=true",
                     f"model.loader.text_encoder.source={root / 'full'}")
    with pytest.raises(ConfigError) as err:
        loader.load(str(root / "tiny_ltx_t2v.safetensors"), "required", 42)
    message = str(err.value)
    assert "model.loader.config is not set" in message
    assert f"{hub_download()} Lightricks/LTX-Video" in message
    with pytest.raises(ConfigError,
                       match=r"is not a local diffusers-format directory \(no model_index.json\)"):
        _loader(f"model.loader.config={root / 'full' / 'vae'}", "model.loader.offline=true").load(
            str(root / "tiny_ltx_t2v.safetensors"), "required", 42)


def test_missing_text_encoder_is_a_weights_error_naming_the_key(tiny, offline):
    root, _ = tiny
    loader = _loader(f"model.loader.config={root / 'config'}", "model.loader.offline=true",
                     f"model.loader.text_encoder.source={root / 'absent'}")
    with pytest.raises(WeightsLoadError, match=r"model.loader.text_encoder could not be loaded"):
        loader.load(str(root / "tiny_ltx_t2v.safetensors"), "required", 42)


def test_required_weights_missing_and_auto_fallback(tiny, offline, tmp_path):
    with pytest.raises(WeightsNotFoundError, match=r"no weights were found .* does not exist"):
        _loader().load(str(tmp_path / "nothing.safetensors"), "required", 42)
    fallback = _loader().load(str(tmp_path / "nothing.safetensors"), "auto", 42)
    assert fallback.weights["kind"] == "random-init"
    assert "does not exist" in fallback.weights["reason"]


def test_lora_without_peft_says_how_to_install(tiny, offline, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "peft" else real_find_spec(name, *a))
    needs_peft = r"model.loader.lora.path=.* needs the peft package .*pip install peft"
    with pytest.raises(ConfigError, match=needs_peft):
        _loader("model.loader.lora.path=/some/lora.safetensors").load(None, "random", 42)


def test_weights_too_big_are_refused_from_the_headers_before_anything_loads(tiny, offline,
                                                                            monkeypatch):
    import ascendbench.models.memory as memory
    from ascendbench.errors import InsufficientMemoryError
    from ascendbench.models.pipeline import PipelineLoader

    root, pipe = tiny
    monkeypatch.setattr(memory, "available_host_bytes",
                        lambda: 100_000)  # 100 kB: less than the tiny twin
    monkeypatch.setattr(PipelineLoader, "_load_object",
                        lambda *a: pytest.fail("text encoder loaded before the check"))
    loader = _loader(f"model.loader.config={root / 'config'}", "model.loader.offline=true",
                     f"model.loader.text_encoder.source={root / 'full'}")
    with pytest.raises(InsufficientMemoryError) as err:
        loader.load(str(root / "tiny_ltx_t2v.safetensors"), "required", 42)
    text_encoder = sum(p.numel() for p in pipe.text_encoder.parameters())
    assert f"text_encoder {text_encoder / 1e9:.3f}B" in str(err.value)
    assert "safetensors headers" in str(err.value)
