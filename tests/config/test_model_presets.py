"""Per-model preset sizes: a model names its preset family in one line; the family x preset files hold values.

``model_presets.json`` holds, for every model and preset, the preset values the tree gave before the
families replaced the per-model alias files (captured from the old tree); every composition must match it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ascendbench.config import config_dir, group_options

EXPECTED = json.loads((Path(__file__).parent / "model_presets.json").read_text())
FAMILY_LINE = re.compile(r"override /model_preset@_global_\.model_preset: (\w+)_\$\{preset\}")


def test_every_model_and_preset_is_covered():
    assert sorted(EXPECTED) == group_options("model")
    assert all(sorted(presets) == group_options("preset") for presets in EXPECTED.values())


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_sizes_and_budget_of_every_model_and_preset_are_unchanged(compose_job, model):
    for preset, expected in EXPECTED[model].items():
        cfg = compose_job([f"model={model}", f"preset={preset}"])
        assert {key: cfg.preset[key] for key in expected} == expected, f"model={model} preset={preset}"
        assert cfg.preset.name == preset


def test_the_command_line_wins_over_the_model_preset(compose_job):
    cfg = compose_job(["model=ltx_video_t2v", "preset=balanced", "preset.height=64", "preset.max_iters=7"])
    assert (cfg.preset.height, cfg.preset.width, cfg.preset.num_frames) == (64, 512, 65)
    assert (cfg.preset.max_iters, cfg.bench.max_iters) == (7, 7)


def test_a_model_without_family_keeps_the_preset_and_a_family_is_recorded(compose_job):
    plain = compose_job(["model=flux2_small_decoder", "preset=quality"], hydra=True)
    assert plain.hydra.runtime.choices.model_preset is None
    assert (plain.preset.height, plain.preset.num_frames) == (1024, 161)
    tiny = compose_job(["model=tiny_ltx2_t2v", "preset=mini"], hydra=True)
    assert tiny.hydra.runtime.choices.model_preset == "ltx_t2v_mini", "the tiny twin inherits its real twin's family"


def test_family_files_hold_values_and_every_family_has_every_preset():
    root = config_dir()
    for path in (root / "model_preset").glob("*.yaml"):
        own = OmegaConf.to_container(OmegaConf.load(path))
        assert set(own) - {"defaults"}, f"{path.name} is an alias: it carries no value of its own"
    families = {match.group(1) for path in (root / "model").glob("*.yaml")
                for match in FAMILY_LINE.finditer(path.read_text())}
    assert families == {"ltx_sizes", "ltx_t2v", "videoflextok", "tiny_videoflextok", "tiny_i2v"}
    for family in families:
        for preset in group_options("preset"):
            assert (root / "model_preset" / f"{family}_{preset}.yaml").is_file(), (family, preset)
