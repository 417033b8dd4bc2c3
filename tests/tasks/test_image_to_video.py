"""Image to video: the conditioning image (file or generated), its provenance, the I2V twins.

The LTX-Video twin runs through the real entry point loaded from one original-layout single file
(config directory, separate text encoder, ``model.loader.offline=true``) and conditioned on a PNG
file; the LTX-2 twin runs through ``run_job`` on a generated image. The real models' configs dry-run
with nothing loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest
import torch
from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
from PIL import Image

from ascendbench.errors import ConfigError
from ascendbench.tasks import text_to_video as i2v
from ascendbench.tasks.text_to_video import ImageToVideoTask, generated_image, read_image

from helpers import compose_config, read_record, run_job
from helpers.config import ltx_single_file_layout

QUICK = ["device=cpu", "preset.warmup=0", "preset.iters=1", "bench.flops.enabled=false"]
REAL_AND_TWIN = [("ltx_video_i2v", "tiny_ltx_i2v"), ("sulphur2_i2v", "tiny_ltx2_i2v")]


@pytest.fixture
def png(tmp_path):
    """A 40x20 PNG file with a gradient (resized by the task to the preset's size)."""
    pixels = torch.arange(20 * 40 * 3,
                          dtype=torch.int64).remainder(251).to(torch.uint8).reshape(20, 40, 3)
    path = tmp_path / "cond.png"
    Image.fromarray(pixels.numpy()).save(path)
    return path


def test_generated_image_is_seeded_and_structured():
    image = generated_image(32, 48, seed=7)
    assert image.shape == (1, 3, 32, 48) and image.dtype == torch.uint8
    assert torch.equal(image, generated_image(32, 48, seed=7))
    assert not torch.equal(image, generated_image(32, 48, 8))
    assert image.float().std() > 20, "a picture with content, not a flat field"


def test_image_file_is_resized_and_its_digest_recorded(png):
    pixels, facts = read_image(png, 32, 32)
    assert pixels.shape == (1, 3, 32, 32) and pixels.dtype == torch.uint8
    assert facts["sha256"] == "sha256:" + hashlib.sha256(png.read_bytes()).hexdigest()
    assert (facts["path"], facts["format"], facts["original_size"], facts["resized"]) == (
        str(png), "PNG", [40, 20], True)
    same, unresized = read_image(png, 20, 40)
    assert unresized["resized"] is False
    assert torch.equal(same[0].permute(1, 2, 0), torch.from_numpy(np.array(Image.open(png))))
    assert i2v.to_pil(same).size == (40, 20)


def test_task_inputs_and_sources(png):
    task = ImageToVideoTask(prompt="p", spatial_compression=8, image=str(png))
    inputs = task.make_inputs({"height": 32, "width": 32, "num_frames": 9, "steps": 2,
                               "batch_size": 1}, seed=3)
    assert set(inputs) == {"seed", "image"} and inputs["image"].shape == (1, 3, 32, 32)
    assert task.input_sources()["image"]["kind"] == "file"
    assert task.pipeline_inputs(inputs)["image"].size == (32, 32)
    generated = ImageToVideoTask(prompt="p", spatial_compression=8)
    made = generated.make_inputs({"height": 32, "width": 32, "num_frames": 9, "steps": 2,
                                  "batch_size": 1}, seed=3)
    assert torch.equal(made["image"], generated_image(32, 32, 3))
    assert generated.input_sources() == {"image": {
        "kind": "generated", "seed": 3,
        "generator": "ascendbench.tasks.inputs.structured_clip, frame 0"}}


@pytest.mark.parametrize("bad", ["absent.png", "not_an_image.png"])
def test_a_missing_or_unreadable_image_names_the_key(tmp_path, bad):
    (tmp_path / "not_an_image.png").write_text("no pixels here")
    task = ImageToVideoTask(prompt="p", spatial_compression=8, image=str(tmp_path / bad))
    with pytest.raises(ConfigError, match="model.task.image="):
        task.make_inputs({"height": 32, "width": 32, "num_frames": 9, "steps": 2, "batch_size": 1},
                         seed=0)


class _Vae:
    """``encode`` returns a posterior in the dtype of its parameters, as diffusers' VAEs do."""

    def __init__(self, dtype):
        values = torch.linspace(-1, 1, 2 * 4 * 64, dtype=torch.float64)
        self.params = values.reshape(1, 8, 1, 8, 8).to(dtype)

    def encode(self, x):
        return type("Out", (), {"latent_dist": DiagonalGaussianDistribution(self.params)})()


def _sample(vae):
    return vae.encode(None).latent_dist.sample(torch.Generator().manual_seed(0)).double()


def test_posterior_noise_is_drawn_in_float32_whatever_the_dtype():
    f32, f64 = _Vae(torch.float32), _Vae(torch.float64)
    assert (_sample(f32) - _sample(f64)).abs().max() > 0.1, "diffusers: noise in the VAE's dtype"
    assert all(i2v.float32_encode_noise(vae) for vae in (f32, f64, f64))
    assert f64.encode.__wrapped__.__func__ is _Vae.encode, "wrapped once"
    assert (_sample(f32) - _sample(f64)).abs().max() < 1e-6


def test_ltx2_image_crf_needs_pyav_unless_zero(monkeypatch):
    class Pipe:
        def __call__(self, image=None, image_crf=None):
            """Like LTX2ImageToVideoPipeline."""

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "av" else real_find_spec(name))
    with pytest.raises(ConfigError, match="pip install av"):
        i2v.check_image_crf(Pipe(), {"image_crf": None})
    i2v.check_image_crf(Pipe(), {"image_crf": 0})
    i2v.check_image_crf(lambda image=None: None, {})  # LTX-Video: no image_crf at all


@pytest.mark.parametrize("real, twin", REAL_AND_TWIN)
def test_twins_keep_the_real_classes_and_task(compose_cfg, real, twin):
    a, b = compose_cfg([f"model={real}"]).model, compose_cfg([f"model={twin}"]).model
    assert a.loader.class_path == b.loader.class_path
    assert a.loader.class_path.endswith("ImageToVideoPipeline")
    assert a.task._target_ == b.task._target_ == "ascendbench.tasks.text_to_video.ImageToVideoTask"
    assert a.loader.tiny_twin == twin and b.weights == "random" and a.task.image is None
    for name, spec in a.loader.components.items():
        assert b.loader.components[name].class_path == spec.class_path, name


def test_real_sizes_and_tiny_presets(compose_cfg):
    real = compose_cfg(["model=ltx_video_i2v", "preset=balanced"]).preset
    assert (real.height, real.width, real.num_frames, real.steps) == (320, 512, 65, 50)
    tiny = compose_cfg(["model=tiny_ltx_i2v"]).preset
    sizes = (tiny.height, tiny.width, tiny.num_frames, tiny.steps, tiny.max_iters)
    assert sizes == (32, 32, 9, 2, 10)
    assert compose_cfg(["model=tiny_ltx2_i2v", "preset=quality"]).preset.num_frames == 25


@pytest.mark.parametrize("model", ["ltx_video_i2v", "sulphur2_i2v"])
def test_the_real_configs_dry_run_loading_nothing(tmp_path, monkeypatch, model):
    import safetensors.torch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(safetensors.torch, "load_file",
                        lambda *a, **k: pytest.fail("a dry run loaded weights"))
    cfg = compose_config([f"model={model}", "device=cpu", "dry_run=true",
                          f"baseline.cache_dir={tmp_path / 'baselines'}"])
    record = run_job(cfg, tmp_path / "job")
    plan = record["plan"]
    assert plan["inputs"]["image"]["shape"] == [1, 3, 256, 256]
    assert plan["inputs"]["image"]["source"]["seed"] == 42
    # planned only (load_file would fail the test)
    assert plan["weights"]["action"] in {"random-init", "load"}
    # On a host smaller than the model the plan says so (and the dry run fails); memory is its only
    # problem.
    assert all(" GB" in problem for problem in plan["problems"]), plan["problems"]
    assert record["status"] == "ok" or record["error"]["reason"] == "dry_run"


@pytest.fixture
def i2v_single_file(tmp_path):
    """The tiny LTX I2V pipeline as users get LTX-Video: a single file, configs, the T5 apart."""
    return ltx_single_file_layout("tiny_ltx_i2v", tmp_path)


def test_image_to_video_from_a_single_file_and_an_image_file(cli, i2v_single_file, png):
    root = i2v_single_file
    result, job = cli("model=tiny_ltx_i2v", f"model.source={root / 'weights'}",
                      "model.weights=required",
                      f"model.loader.config={root / 'config'}", "model.loader.offline=true",
                      f"model.loader.text_encoder.source={root / 'full'}",
                      f"model.task.image={png}", f"baseline.cache_dir={root / 'baselines'}", *QUICK)
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)
    assert record["status"] == "ok" and record["verdict"] == "PASS", record.get("error")
    weights, metrics = record["weights"], record["metrics"]
    assert weights["loader"] == "from_single_file"
    assert weights["files"] == ["tiny_ltx_i2v.safetensors"]
    assert record["baseline"]["process"] == "child", "the reference rebuilt it from the same file"
    image = record["inputs"]["image"]
    assert image["shape"] == [1, 3, 32, 32] and image["dtype"] == "uint8"
    assert image["sha256"].startswith("sha256:")
    assert image["source"]["sha256"] == "sha256:" + hashlib.sha256(png.read_bytes()).hexdigest()
    assert image["source"]["path"] == str(png.resolve())
    assert metrics["video_ssim_mean"]["value"] > 0.99
    assert metrics["video_psnr_db_mean"]["verdict"] == "PASS"
    assert set(record["bench"]["phases"]) >= {"text_encoding", "vae_encode", "step", "vae_decode"}
    assert record["artifacts"]["video_device_mp4"] == ["videos/video_device_0.mp4"]
    assert len(record["artifacts"]["video_device_png"]) == 3
    assert all((job / p).stat().st_size for p in record["artifacts"]["video_device_png"])


def test_ltx2_image_to_video_twin_with_audio(tmp_path):
    cfg = compose_config(["model=tiny_ltx2_i2v", f"baseline.cache_dir={tmp_path / 'baselines'}",
                          "baseline.process=in-process", *QUICK])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "ok" and record["verdict"] == "PASS", record.get("error")
    assert record["inputs"]["image"]["source"]["kind"] == "generated"
    assert record["job"]["sizes"]["height"] == 32
    metrics = record["metrics"]
    assert metrics["audio/cosine"]["value"] > 0.9999
    assert metrics["video/video_psnr_db_mean"]["verdict"] == "PASS"
