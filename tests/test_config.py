"""Every option of every config group composes, and the defaults are the documented ones."""

from __future__ import annotations

import pytest

from ascendbench.config import group_options, load_option
from ascendbench.errors import ConfigError

GROUPS = ("model", "device", "dtype", "preset", "metric", "bench", "baseline")


def test_defaults_compose_to_the_documented_job(compose_cfg):
    cfg = compose_cfg()
    assert (cfg.model.name, cfg.device.name, cfg.dtype.name, cfg.preset.name) == (
        "flux2_small_decoder", "auto", "auto", "mini")
    assert cfg.seed == 42 and cfg.dry_run is False
    assert cfg.model.weights == "auto"


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_of_every_group_composes(compose_cfg, group):
    options = group_options(group)
    assert options, f"conf/{group} has no options"
    for option in options:
        cfg = compose_cfg([f"{group}={option}"])
        assert cfg[group] is not None


def test_issue_groups_have_their_options():
    assert {"cpu", "cuda", "npu", "auto"} <= set(group_options("device"))
    assert {"float32", "float16", "bfloat16", "auto"} <= set(group_options("dtype"))
    assert {"mini", "balanced", "quality"} <= set(group_options("preset"))
    assert {"flux2_small_decoder", "tiny_flux2_decoder"} <= set(group_options("model"))
    assert "regression" in group_options("metric")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_each_dtype_carries_tolerances_and_sourced_thresholds(compose_cfg, dtype):
    cfg = compose_cfg([f"dtype={dtype}"])
    assert cfg.dtype.atol > 0 and cfg.dtype.rtol > 0
    for name, rule in cfg.dtype.thresholds.items():
        assert ("max" in rule) != ("min" in rule), name
        assert rule.source, f"threshold {name} of {dtype} has no source"


def test_presets_grow_in_size(compose_cfg):
    sizes = [compose_cfg([f"preset={p}"]).preset for p in ("mini", "balanced", "quality")]
    assert [p.height for p in sizes] == [256, 512, 1024]


def test_tiny_twin_inherits_the_real_class(compose_cfg):
    real = compose_cfg(["model=flux2_small_decoder"]).model
    tiny = compose_cfg(["model=tiny_flux2_decoder"]).model
    assert tiny.loader.class_path == real.loader.class_path == "diffusers.AutoencoderKLFlux2"
    assert tiny.weights == "random" and tiny.task._target_ == real.task._target_
    assert list(real.loader.architecture.decoder_block_out_channels) == [96, 192, 384, 384]


def test_load_option_returns_the_option_keys_without_its_defaults_list():
    float32 = load_option("dtype", "float32")
    assert "defaults" not in float32 and float32.name == "float32" and float32.rtol == 1.3e-6
    with pytest.raises(ConfigError, match="allowed: auto, bfloat16, float16, float32"):
        load_option("dtype", "float8")


def test_load_option_hands_out_copies_and_reads_an_edited_file_again(tmp_path, monkeypatch):
    import ascendbench.config as config_module

    (tmp_path / "dtype").mkdir()
    option = tmp_path / "dtype" / "mine.yaml"
    option.write_text("defaults:\n  - _self_\nname: float32\natol: 1.0\n")
    monkeypatch.setattr(config_module, "config_dir", lambda: tmp_path)
    first = load_option("dtype", "mine")
    first.atol = 5.0  # a caller's change stays in its copy
    assert (load_option("dtype", "mine").atol == 1.0
            and "defaults" not in load_option("dtype", "mine"))
    option.write_text("name: float32\natol: 2.0\n")
    assert load_option("dtype", "mine").atol == 2.0
