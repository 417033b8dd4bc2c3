"""compare.layers patterns: names, globs and container slices."""

from __future__ import annotations

import pytest

from ascendbench.compare import normalize_spec, select_modules
from ascendbench.errors import ConfigError

from conftest import build_tiny_flux2


@pytest.fixture(scope="module")
def model():
    return build_tiny_flux2()


def test_names_globs_and_slices(model):
    assert select_modules(model, ["decoder.mid_block"]) == ["decoder.mid_block"]
    globbed = select_modules(model, ["decoder.up_blocks.*.resnets.0"])
    assert globbed == ["decoder.up_blocks.0.resnets.0", "decoder.up_blocks.1.resnets.0"]
    assert select_modules(model, ["decoder.up_blocks[:1]", "decoder.up_blocks[-1]"]) == [
        "decoder.up_blocks.0", "decoder.up_blocks.1"]
    assert select_modules(model, ["decoder.up_blocks[1]", "decoder.up_blocks.1"]) == ["decoder.up_blocks.1"]


def test_a_pattern_matching_nothing_names_the_model_modules(model):
    with pytest.raises(ConfigError, match="matches no module.*decoder"):
        select_modules(model, ["transformer_blocks[:3]"])


def test_normalize_spec():
    assert normalize_spec(None) is None and normalize_spec([]) is None
    assert normalize_spec("all") == "all" and normalize_spec(["all"]) == "all"
    assert normalize_spec("decoder.mid_block") == ["decoder.mid_block"]
