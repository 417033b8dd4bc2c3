"""Safe loading: pickle refused unless allowed, strict directory loads, other classes named."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascendbench.errors import UnsafeWeightsError, WeightsLoadError
from ascendbench.models.loader import DiffusersLoader
from ascendbench.models.sources import Layout, NotFound, resolve_source

from helpers import TINY_FLUX2_ARCH, build_tiny_flux2, same_weights


@pytest.fixture
def loader(tiny_flux2_loader):
    return tiny_flux2_loader


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".ckpt"])
def test_pickle_file_is_refused_by_default_in_every_mode(loader, tmp_path, suffix):
    path = tmp_path / f"vae{suffix}"
    torch.save(build_tiny_flux2().state_dict(), path)
    for mode in ("auto", "required"):
        with pytest.raises(UnsafeWeightsError) as err:
            loader.load(str(path), weights=mode)
        message = str(err.value)
        assert str(path) in message and "model.allow_pickle=true" in message
        assert "safetensors" in message
        assert err.value.reason == "pickle_refused"


def test_allowed_pickle_file_loads_through_the_restricted_unpickler(tmp_path):
    path = tmp_path / "vae.ckpt"
    torch.save({"state_dict": build_tiny_flux2().state_dict(), "epoch": 3}, path)  # Lightning-style
    loaded = DiffusersLoader("diffusers.AutoencoderKLFlux2", TINY_FLUX2_ARCH,
                             allow_pickle=True).load(
        str(path), weights="required")
    assert loaded.weights["kind"] == "loaded" and loaded.weights["format"] == "pickle"
    assert "allow_pickle" in loaded.weights["origin"]
    assert same_weights(loaded.module, build_tiny_flux2())


def test_allowed_pickle_still_refuses_arbitrary_objects(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"state_dict": {"w": torch.zeros(1)}, "payload": shutil.rmtree}, path)
    with pytest.raises(WeightsLoadError, match="could not be loaded"):
        DiffusersLoader("diffusers.AutoencoderKLFlux2", TINY_FLUX2_ARCH, allow_pickle=True).load(
            str(path), weights="required")


def test_pickle_only_directory_is_refused_and_safetensors_preferred(tiny_flux2_dir, tmp_path):
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(tiny_flux2_dir / "config.json", pickled / "config.json")
    torch.save(build_tiny_flux2().state_dict(), pickled / "diffusion_pytorch_model.bin")
    with pytest.raises(UnsafeWeightsError, match="diffusion_pytorch_model.bin"):
        resolve_source(str(pickled))
    allowed = resolve_source(str(pickled), Layout(allow_pickle=True))
    assert allowed.pickle and allowed.files[0].name == "diffusion_pytorch_model.bin"
    both = tmp_path / "both"
    shutil.copytree(tiny_flux2_dir, both)
    shutil.copy(pickled / "diffusion_pytorch_model.bin", both)
    found = resolve_source(str(both))
    assert not found.pickle and [p.suffix for p in found.files] == [".safetensors"]


def test_allowed_pickle_directory_loads(tiny_flux2_dir, tmp_path):
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(tiny_flux2_dir / "config.json", pickled / "config.json")
    torch.save(build_tiny_flux2().state_dict(), pickled / "diffusion_pytorch_model.bin")
    loaded = DiffusersLoader("diffusers.AutoencoderKLFlux2", TINY_FLUX2_ARCH,
                             allow_pickle=True).load(
        str(pickled), weights="required")
    assert loaded.weights["format"] == "pickle" and same_weights(loaded.module, build_tiny_flux2())


def test_other_suffixes_are_not_weights(tmp_path):
    path = tmp_path / "weights.npz"
    path.write_bytes(b"not weights")
    assert isinstance(resolve_source(str(path)), NotFound)


def test_directory_with_missing_weights_is_refused_not_random_filled(loader, tiny_flux2_dir,
                                                                     tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(tiny_flux2_dir, partial)
    weights = partial / "diffusion_pytorch_model.safetensors"
    state = {k: v for k, v in load_file(weights).items() if not k.startswith("decoder.mid_block")}
    save_file(state, weights)
    with pytest.raises(WeightsLoadError) as err:
        loader.load(str(partial), weights="auto")
    message = str(err.value)
    assert "missing keys" in message and "decoder.mid_block" in message and str(partial) in message


def test_directory_of_another_class_is_named(loader, tiny_flux2_dir, tmp_path):
    other = tmp_path / "kl"
    shutil.copytree(tiny_flux2_dir, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "_class_name": "AutoencoderKL"}))
    with pytest.raises(WeightsLoadError,
                       match="holds a AutoencoderKL checkpoint .* AutoencoderKLFlux2"):
        loader.load(str(other), weights="required")


def test_trust_remote_code_is_never_passed(loader, tiny_flux2_dir, monkeypatch):
    from diffusers import AutoencoderKLFlux2

    seen = {}
    original = AutoencoderKLFlux2.from_pretrained.__func__

    def spy(cls, *args, **kwargs):
        seen.update(kwargs)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AutoencoderKLFlux2, "from_pretrained", classmethod(spy))
    loader.load(str(tiny_flux2_dir), weights="required")
    assert "trust_remote_code" not in seen and seen["use_safetensors"] is True
