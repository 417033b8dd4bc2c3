"""Every shipped loader declares the one loader interface (ascendbench.models.base.ModelLoader)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import get_class

from ascendbench.config import group_options
from ascendbench.models import sources
from ascendbench.models.base import ModelLoader, locate
from ascendbench.models.sources import NotFound


def loader_target(model: str) -> str:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="ascendbench.conf", version_base="1.3"):
            return compose(config_name="config", overrides=[f"model={model}"]).model.loader._target_
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("model", group_options("model"))
def test_every_shipped_loader_is_a_model_loader(model):
    target = loader_target(model)
    if target.startswith("ascendbench."):
        assert issubclass(get_class(target), ModelLoader), target


def test_the_base_cannot_be_built_without_load():
    with pytest.raises(TypeError, match="abstract"):
        ModelLoader()


def test_a_loader_outside_the_interface_is_still_located(tmp_path):
    class Plain:  # a user's loader object with only load(): the generic lookup applies
        subfolder = None

    found = locate(Plain(), str(tmp_path / "missing"), None)
    assert isinstance(found, NotFound) and "does not exist" in found.reason


def test_the_download_hint_names_the_installed_hub_cli(monkeypatch):
    """huggingface_hub >= 1.0 ships only `hf`; older releases only `huggingface-cli`."""
    for version, command in (("0.36.0", "huggingface-cli download"), ("1.2.0", "hf download")):
        monkeypatch.setattr(sources, "installed_version", lambda name, v=version: v)
        assert sources.hub_download() == command
