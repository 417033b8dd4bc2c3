"""compare.layers patterns: names, globs and container slices."""

from __future__ import annotations

import pytest

from ascendbench.compare.select import normalize_spec, select_modules
from ascendbench.errors import ConfigError

from helpers import build_tiny_flux2


@pytest.fixture(scope="module")
def model():
    return build_tiny_flux2()


def test_names_globs_and_slices(model):
    assert select_modules(model, ["decoder.mid_block"]) == ["decoder.mid_block"]
    globbed = select_modules(model, ["decoder.up_blocks.*.resnets.0"])
    assert globbed == ["decoder.up_blocks.0.resnets.0", "decoder.up_blocks.1.resnets.0"]
    assert select_modules(model, ["decoder.up_blocks[:1]", "decoder.up_blocks[-1]"]) == [
        "decoder.up_blocks.0", "decoder.up_blocks.1"]
    once = select_modules(model, ["decoder.up_blocks[1]", "decoder.up_blocks.1"])
    assert once == ["decoder.up_blocks.1"]


def test_a_pattern_matching_nothing_names_the_model_modules(model):
    with pytest.raises(ConfigError, match="matches no module.*decoder"):
        select_modules(model, ["transformer_blocks[:3]"])


def test_normalize_spec():
    assert normalize_spec(None) is None and normalize_spec([]) is None
    assert normalize_spec("all") == "all" and normalize_spec(["all"]) == "all"
    assert normalize_spec("decoder.mid_block") == ["decoder.mid_block"]


def test_pipeline_components_are_named_by_component():
    from types import SimpleNamespace

    import torch

    blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(4)])
    transformer = torch.nn.Module()
    transformer.transformer_blocks = blocks
    pipe = SimpleNamespace(components={"transformer": transformer, "scheduler": object(),
                                       "vae": torch.nn.Conv2d(1, 1, 1)})
    chosen = select_modules(pipe, ["transformer.transformer_blocks[:3]",
                                   "transformer.transformer_blocks[-1]"])
    assert chosen == [f"transformer.transformer_blocks.{i}" for i in range(4)]
    assert select_modules(pipe, ["vae"]) == ["vae"]
