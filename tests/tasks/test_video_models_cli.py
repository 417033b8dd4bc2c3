"""The LTX-Video family and Sulphur-2 twins end to end, in-process: two CLI, two ``run_job`` jobs.

The CLI jobs (``cli`` fixture: the real entry point with ``sys.argv`` set) load their tiny twin the
way users load the real model: the VAE layer from a saved VAE's safetensors file, the text-to-video
pipeline from one original-layout single file with a local config directory and a separately loaded
text encoder, with ``model.loader.offline=true`` (its CPU reference rebuilt from the same file in
the child process). The whole-VAE decode and the LTX-2 twin run through ``run_job`` on a composed
config.
"""

from __future__ import annotations

import pytest
import torch

from helpers import compose_config, read_record, run_job
from helpers.config import ltx_single_file_layout

QUICK = ["device=cpu", "preset.warmup=0", "preset.iters=1", "bench.flops.enabled=false"]


def _ok(result, job_dir):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = read_record(job_dir)
    assert record["status"] == "ok" and record["verdict"] == "PASS", record.get("error")
    return record


@pytest.fixture
def cache(tmp_path):
    return f"baseline.cache_dir={tmp_path / 'baselines'}"


def _job(tmp_path, *overrides: str) -> dict:
    """One job of ``run_job`` on the config the CLI would compose."""
    cfg = compose_config([*overrides, f"baseline.cache_dir={tmp_path / 'baselines'}",
                          "baseline.process=in-process", *QUICK])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "ok" and record["verdict"] == "PASS", record.get("error")
    return record


def test_whole_video_decode_writes_frames_and_mp4(tmp_path):
    record, job = _job(tmp_path, "model=tiny_ltx_video_vae", "preset.height=64",
                       "preset.width=64"), tmp_path / "job"
    assert record["inputs"]["latent"]["shape"] == [1, 8, 2, 2, 2]
    assert record["bench"]["throughput"]["unit"] == "frames/s"
    assert record["bench"]["throughput"]["items_per_call"] == 9
    assert record["metrics"]["video_psnr_db_mean"]["value"] > 100, "float32 vs float64 decoder"
    for key in ("video_device_png", "video_device_mp4", "video_reference_png",
                "video_reference_mp4"):
        assert record["artifacts"][key]
        assert all((job / p).stat().st_size > 0 for p in record["artifacts"][key])


def test_one_layer_from_the_vae_file_with_determinism(cli, cache, tmp_path):
    from diffusers import AutoencoderKLLTX2Video

    torch.manual_seed(0)
    vae = AutoencoderKLLTX2Video(latent_channels=8, block_out_channels=(8, 16, 32, 64),
                                 decoder_block_out_channels=(8, 16, 32),
                                 layers_per_block=(1, 1, 1, 1, 1),
                                 decoder_layers_per_block=(1, 1, 1, 1))
    vae.to(torch.bfloat16).save_pretrained(tmp_path / "ltx2" / "vae")
    result, job = cli("model=tiny_ltx_video_vae_conv_in", f"model.source={tmp_path / 'ltx2'}",
                      "model.loader.subfolder=vae", "model.weights=required",
                      "baseline.process=in-process", cache, *QUICK)
    record = _ok(result, job)
    assert record["weights"]["kind"] == "loaded" and set(record["weights"]["tensors"]) == {
        "decoder.conv_in.conv.weight", "decoder.conv_in.conv.bias"}
    assert record["inputs"]["latent"]["shape"] == [1, 8, 2, 8, 8]
    entry = record["metrics"]["determinism/second_run_max_abs_diff"]
    assert entry["value"] == 0.0 and entry["verdict"] == "PASS" and "seed report" in entry["source"]
    same_bytes = record["inputs"]["latent"]["sha256"]  # a float32 run: the input bytes unchanged
    assert entry["details"]["device_input"]["sha256"] == same_bytes
    assert record["metrics"]["max_abs_err"]["threshold"] == 0.01


@pytest.fixture
def ltx_single_file(tmp_path):
    """The tiny LTX pipeline as users get LTX-Video: a single file, configs, the T5 apart."""
    return ltx_single_file_layout("tiny_ltx_t2v", tmp_path)


def test_text_to_video_from_a_single_file_fully_offline(cli, cache, ltx_single_file):
    root = ltx_single_file
    result, job = cli("model=tiny_ltx_t2v", f"model.source={root / 'weights'}",
                      "model.weights=required",
                      f"model.loader.config={root / 'config'}", "model.loader.offline=true",
                      f"model.loader.text_encoder.source={root / 'full'}", "preset.height=32",
                      "preset.width=32", "preset.steps=2", cache, *QUICK)
    record = _ok(result, job)
    weights = record["weights"]
    assert weights["loader"] == "from_single_file" and weights["offline"] is True
    assert weights["files"] == ["tiny_ltx_t2v.safetensors"]
    assert record["baseline"]["process"] == "child", "the reference rebuilt it from the same file"
    metrics = record["metrics"]
    assert metrics["video_ssim_mean"]["value"] > 0.99
    assert metrics["video_psnr_db_mean"]["verdict"] == "PASS"
    assert set(record["bench"]["phases"]) >= {"text_encoding", "step", "vae_decode"}
    assert record["artifacts"]["video_device_mp4"] == ["videos/video_device_0.mp4"]


def test_ltx2_text_to_video_twin_with_audio(tmp_path):
    record = _job(tmp_path, "model=tiny_ltx2_t2v", "preset.height=32", "preset.width=32",
                  "preset.steps=2")
    assert record["job"]["preset"] == "mini" and record["weights"]["kind"] == "random-init"
    metrics = record["metrics"]  # two outputs: metric names are prefixed by the output's name
    assert metrics["audio/cosine"]["value"] > 0.9999
    assert metrics["video/video_psnr_db_mean"]["threshold"] == 30.0
