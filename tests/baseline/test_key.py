"""The cache key follows what changes the reference outputs, and nothing else."""

from __future__ import annotations

import json
import shutil

import torch
from hydra.utils import instantiate

from ascendbench.baseline.key import cache_key, key_material
from ascendbench.precision import reference_dtype
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN

RANDOM = {"kind": "random-init", "init_seed": 42, "digest": None}


def _key(compose_cfg, overrides=(), weights=RANDOM, precision=torch.float32):
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN, *overrides])
    inputs = describe(instantiate(cfg.model.task).make_inputs(cfg.preset, cfg.seed))
    return cache_key(key_material(cfg, weights, inputs, precision))


def test_device_dtype_and_run_settings_do_not_change_the_key(compose_cfg):
    base = _key(compose_cfg, ["dtype=float16"])
    for overrides in (["dtype=bfloat16"], ["device=cuda", "dtype=bfloat16"], ["device=npu"],
                      ["preset.iters=7", "preset.warmup=3"], ["metric=video"],
                      ["compare.layers=all"],
                      ["preset=balanced", "preset.height=32", "preset.width=32",
                       "preset.num_frames=9", "preset.iters=2"],
                      ["baseline.cache_dir=/elsewhere"]):
        assert _key(compose_cfg, overrides) == base, overrides


def test_seed_inputs_weights_and_precision_change_the_key(compose_cfg):
    base = _key(compose_cfg)
    assert _key(compose_cfg, ["seed=7"]) != base
    assert _key(compose_cfg, ["preset.height=64"]) != base
    assert _key(compose_cfg, weights={**RANDOM, "init_seed": 43}) != base
    assert _key(compose_cfg, precision=torch.float64) != base
    assert _key(compose_cfg, ["model.loader.architecture.layers_per_block=2"]) != base
    loaded = {"kind": "loaded", "digest": "sha256:aaa", "source": None}
    assert _key(compose_cfg, weights=loaded) != base
    other = _key(compose_cfg, weights={**loaded, "digest": "sha256:bbb"})
    assert other != _key(compose_cfg, weights=loaded)


def test_the_config_json_beside_loaded_weights_is_part_of_the_key(compose_cfg, tiny_flux2_dir,
                                                                   tmp_path):
    copy = shutil.copytree(tiny_flux2_dir, tmp_path / "model")
    weights = {"kind": "loaded", "digest": "sha256:same", "source": str(copy)}
    before = _key(compose_cfg, weights=weights)
    config = json.loads((copy / "config.json").read_text())
    config["norm_num_groups"] = 2
    (copy / "config.json").write_text(json.dumps(config))
    assert _key(compose_cfg, weights=weights) != before


def test_auto_reference_precision_is_float64_for_every_device_dtype():
    """So a dtype sweep shares one reference; the memory fallback to float32 is the stage's."""
    halves = (torch.float32, torch.float16, torch.bfloat16)
    assert {reference_dtype("auto", d) for d in halves} == {torch.float64}
    assert reference_dtype("float32", torch.float16) == torch.float32


def test_the_source_of_the_task_loader_and_model_class_is_in_the_key(compose_cfg):
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN])
    inputs = describe(instantiate(cfg.model.task).make_inputs(cfg.preset, cfg.seed))
    sources = key_material(cfg, RANDOM, inputs, torch.float32)["sources"]
    assert set(sources) == {"ascendbench.models.loader.DiffusersLoader",
                            "diffusers.AutoencoderKLFlux2",
                            "ascendbench.tasks.vae_decode.VaeDecodeTask"}
    assert all(digest.startswith("sha256:") for digest in sources.values())


def test_device_patches_the_reference_never_applies_stay_out_of_the_key(compose_cfg):
    """An attention-backend A/B sweep shares one reference; a patch the reference applies still
    re-keys."""
    device_patch = ("+model.patches=[{name: diffusers_attention_backend, backend: {b}, "
                    "devices: [npu]}]")
    base = _key(compose_cfg)
    assert _key(compose_cfg, [device_patch.replace("{b}", "_native_npu")]) == base
    assert _key(compose_cfg, [device_patch.replace("{b}", "native")]) == base
    reference_patch = "+model.patches=[{name: flex_attention_dense, reference: true}]"
    assert _key(compose_cfg, [reference_patch]) != base
