"""Loading FLUX.2-style decoders from a directory, a single file, the hub cache, or random init."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from ascendbench.errors import ConfigError, WeightsLoadError, WeightsNotFoundError
from ascendbench.models.loader import DiffusersLoader

from helpers import build_tiny_flux2, same_weights


@pytest.fixture
def loader(tiny_flux2_loader):
    return tiny_flux2_loader


def test_directory_is_loaded_with_digest(loader, tiny_flux2_dir):
    loaded = loader.load(str(tiny_flux2_dir), weights="required")
    assert loaded.weights["kind"] == "loaded"
    assert loaded.weights["digest"].startswith("sha256:") and len(loaded.weights["digest"]) == 71
    assert loaded.weights["origin"] == "local directory"
    assert same_weights(loaded.module, build_tiny_flux2())
    assert loaded.weights["num_params"] == sum(p.numel() for p in build_tiny_flux2().parameters())


def test_single_safetensors_file_is_loaded_into_the_architecture(loader, tmp_path):
    path = tmp_path / "vae.safetensors"
    save_file(build_tiny_flux2().state_dict(), str(path))
    loaded = loader.load(str(path), weights="required")
    assert loaded.weights["kind"] == "loaded" and loaded.weights["files"] == ["vae.safetensors"]
    assert same_weights(loaded.module, build_tiny_flux2())


def test_file_of_another_architecture_lists_missing_and_unexpected_keys(loader, tmp_path):
    path = tmp_path / "other.safetensors"
    save_file({"encoder.conv_in.weight": torch.zeros(1), "something.else": torch.zeros(2)},
              str(path))
    with pytest.raises(WeightsLoadError, match=r"missing keys .* unexpected keys"):
        loader.load(str(path), weights="required")


def test_required_but_missing_says_how_to_fetch(loader, tmp_path):
    with pytest.raises(WeightsNotFoundError) as err:
        loader.load(str(tmp_path / "nowhere"), weights="required")
    message = str(err.value)
    assert str(tmp_path / "nowhere") in message and "HF_ENDPOINT" in message
    assert "model.source=" in message


def test_auto_falls_back_to_labelled_random_init(loader, tmp_path):
    loaded = loader.load(str(tmp_path / "nowhere"), weights="auto", init_seed=7)
    assert loaded.weights["kind"] == "random-init" and loaded.weights["init_seed"] == 7
    assert "does not exist" in loaded.weights["reason"] and loaded.weights["digest"] is None


def test_random_init_is_seeded_and_leaves_global_rng_alone(loader):
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = loader.load(None, weights="random", init_seed=3).module
    after = torch.rand(1)
    b = loader.load(None, weights="random", init_seed=3).module
    c = loader.load(None, weights="random", init_seed=4).module
    assert torch.equal(before, after), "random init must not consume the caller's RNG"
    assert same_weights(a, b) and not same_weights(a, c)


def test_hub_id_offline_and_uncached(loader, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    loaded = loader.load("black-forest-labs/FLUX.2-small-decoder", weights="auto")
    assert loaded.weights["kind"] == "random-init"
    assert "offline (HF_HUB_OFFLINE=1), nothing cached" in loaded.weights["reason"]
    with pytest.raises(WeightsNotFoundError, match="offline"):
        loader.load("black-forest-labs/FLUX.2-small-decoder", weights="required")


def test_unknown_weights_mode_and_class(tmp_path):
    with pytest.raises(ConfigError, match="auto, required, random"):
        DiffusersLoader("diffusers.AutoencoderKLFlux2").load(None, weights="maybe")
    with pytest.raises(ConfigError, match="cannot be imported"):
        DiffusersLoader("diffusers.NoSuchModel").load(None, weights="random")


def test_real_flux2_small_decoder_architecture_has_the_seed_parameter_count(compose_cfg):
    cfg = compose_cfg(["model=flux2_small_decoder"])
    loader = DiffusersLoader(cfg.model.loader.class_path, cfg.model.loader.architecture)
    module = loader.load(None, weights="random").module
    total = sum(p.numel() for p in module.parameters())
    decoder = sum(p.numel() for p in module.decoder.parameters())
    assert round(total / 1e6, 1) == 62.4 and round(decoder / 1e6, 1) == 27.9

