"""Per-model preset sizes: a model names its preset family in one line; the family x preset files
hold values.

Rule-based, so that adding a model needs no edit here: every model composes with every preset, and
its preset values are the preset file's with its family file's on top (the family's own defaults
first), read from the YAML files themselves.
"""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from ascendbench.config import config_dir, group_options

FAMILY_LINE = re.compile(r"override /model_preset@_global_\.model_preset: (\w+)_\$\{preset\}")
NOT_VALUES = ("defaults", "name")


def _own_values(path) -> dict:
    values = OmegaConf.to_container(OmegaConf.load(path))
    return {k: v for k, v in values.items() if k not in NOT_VALUES}


def family_values(option: str) -> dict:
    """A model_preset option's values: those of the options in its defaults list first, then its
    own."""
    path = config_dir() / "model_preset" / f"{option}.yaml"
    values: dict = {}
    for entry in OmegaConf.to_container(OmegaConf.load(path)).get("defaults", []):
        if isinstance(entry, str) and entry != "_self_":
            values.update(family_values(entry))
    values.update(_own_values(path))
    return values


def expected_preset(preset: str, family: str | None) -> dict:
    """What ``preset=<preset>`` must give a model of ``family`` (None: no family), by the files
    alone."""
    values = _own_values(config_dir() / "preset" / f"{preset}.yaml")
    return {**values, **(family_values(family) if family else {})}


@pytest.mark.parametrize("model", group_options("model"))
def test_sizes_and_budget_of_every_model_and_preset_follow_the_files(compose_job, model):
    for preset in group_options("preset"):
        cfg = compose_job([f"model={model}", f"preset={preset}"], hydra=True)
        family = cfg.hydra.runtime.choices.model_preset
        expected = expected_preset(preset, family)
        assert {key: cfg.preset[key] for key in expected} == expected, (
            f"model={model} preset={preset} ({family})")
        assert cfg.preset.name == preset


def test_a_family_value_differs_from_the_plain_preset():
    """The rule can tell: the LTX text-to-video family really changes the mini preset's budget."""
    plain, family = expected_preset("mini", None), expected_preset("mini", "ltx_t2v_mini")
    assert plain["max_iters"] == 200 and family["max_iters"] == 10


def test_the_command_line_wins_over_the_model_preset(compose_job):
    cfg = compose_job(["model=ltx_video_t2v", "preset=balanced", "preset.height=64",
                       "preset.max_iters=7"])
    assert (cfg.preset.height, cfg.preset.width, cfg.preset.num_frames) == (64, 512, 65)
    assert (cfg.preset.max_iters, cfg.bench.max_iters) == (7, 7)


def test_a_model_without_family_keeps_the_preset_and_a_family_is_recorded(compose_job):
    plain = compose_job(["model=flux2_small_decoder", "preset=quality"], hydra=True)
    assert plain.hydra.runtime.choices.model_preset is None
    assert (plain.preset.height, plain.preset.num_frames) == (1024, 161)
    tiny = compose_job(["model=tiny_ltx2_t2v", "preset=mini"], hydra=True)
    assert tiny.hydra.runtime.choices.model_preset == "ltx_t2v_mini", (
        "the tiny twin inherits its real twin's family")


def test_family_files_hold_values_and_every_family_has_every_preset():
    root = config_dir()
    for path in (root / "model_preset").glob("*.yaml"):
        own = OmegaConf.to_container(OmegaConf.load(path))
        assert set(own) - {"defaults"}, f"{path.name} is an alias: it carries no value of its own"
    families = {match.group(1) for path in (root / "model").glob("*.yaml")
                for match in FAMILY_LINE.finditer(path.read_text())}
    assert families == {"ltx_sizes", "ltx_t2v", "videoflextok", "tiny_videoflextok", "tiny_i2v",
                        "flux2_klein"}
    for family in families:
        for preset in group_options("preset"):
            assert (root / "model_preset" / f"{family}_{preset}.yaml").is_file(), (family, preset)
