"""LTX-Video family and Sulphur-2 configs: per-model presets, twins of the real classes."""

from __future__ import annotations

import pytest

REAL_AND_TWIN = [("ltx_video_vae", "tiny_ltx_video_vae"),
                 ("ltx_video_vae_conv_in", "tiny_ltx_video_vae_conv_in"),
                 ("ltx_video_t2v", "tiny_ltx_t2v"), ("sulphur2_base", "tiny_ltx2_t2v")]
SIZES = {"mini": (256, 256, 9), "balanced": (320, 512, 65),
         "quality": (480, 704, 161)}  # height, width, frames


@pytest.mark.parametrize("model", [m for pair in REAL_AND_TWIN for m in pair])
@pytest.mark.parametrize("preset", SIZES)
def test_video_models_get_the_sulphur_seed_sizes(compose_cfg, model, preset):
    cfg = compose_cfg([f"model={model}", f"preset={preset}"])
    assert (cfg.preset.height, cfg.preset.width, cfg.preset.num_frames) == SIZES[preset]
    assert cfg.preset.name == preset and cfg.preset.steps == 50


def test_text_to_video_budgets_and_overrides(compose_cfg):
    quality = compose_cfg(["model=sulphur2_base", "preset=quality"]).preset
    assert (quality.warmup, quality.min_iters, quality.max_iters) == (0, 1, 2)
    decoder = compose_cfg(["model=ltx_video_vae", "preset=quality"]).preset
    assert decoder.warmup == 5, "decoders keep the generic budget"
    twin = compose_cfg(["model=tiny_ltx_t2v", "preset=balanced", "preset.height=32"]).preset
    assert twin.height == 32
    other = compose_cfg(["model=flux2_small_decoder", "preset=balanced"]).preset
    assert other.height == 512, "other models untouched"


@pytest.mark.parametrize("real, twin", REAL_AND_TWIN)
def test_twins_keep_the_real_classes_and_task(compose_cfg, real, twin):
    a, b = compose_cfg([f"model={real}"]).model, compose_cfg([f"model={twin}"]).model
    assert a.loader._target_ == b.loader._target_ and a.task._target_ == b.task._target_
    assert a.loader.get("class_path") == b.loader.get("class_path")
    assert b.weights == "random" and b.source is None and a.weights == "auto"
    for name, spec in (a.loader.get("components") or {}).items():
        assert b.loader.components[name].class_path == spec.class_path, name


def test_seed_facts_in_the_real_configs(compose_cfg):
    vae = compose_cfg(["model=ltx_video_vae"]).model
    arch = vae.loader.architecture
    assert arch.latent_channels == 128 and arch.patch_size == 4
    assert list(arch.block_out_channels) == [256, 512, 1024, 2048]
    assert list(arch.decoder_block_out_channels) == [256, 512, 1024]
    assert list(arch.layers_per_block) == [4, 6, 6, 2, 2]
    assert (arch.spatial_compression_ratio, arch.temporal_compression_ratio) == (32, 8)
    conv = compose_cfg(["model=ltx_video_vae_conv_in"]).model
    assert conv.loader.prefix == "decoder.conv_in.conv." and conv.loader.module.out_channels == 1024
    sulphur = compose_cfg(["model=sulphur2_base"]).model
    assert sulphur.loader.class_path == "diffusers.LTX2Pipeline"
    assert sulphur.patches[0].backend == "_native_npu"
    assert list(sulphur.compare_layers) == ["transformer.transformer_blocks[:3]",
                                            "transformer.transformer_blocks[-1]"]
    assert sulphur.thresholds.video_psnr_db_mean.min == 30.0
    assert sulphur.thresholds.video_ssim_mean.min == 0.95
    assert compose_cfg(["model=sulphur2_base"]).metric.name == "video"
