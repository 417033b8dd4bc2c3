"""Text to image on the tiny FLUX.2-klein twin: end to end through the CLI (the CPU reference in
the child process), a planted black image failing, the noise drawn in float32 for every dtype."""

from __future__ import annotations

import pytest
import torch
from diffusers import Flux2KleinPipeline

from helpers import read_record
from helpers.recipes import readme_recipe, tiny

QUICK = ["model=tiny_flux2_klein", "device=cpu", "preset.height=32", "preset.width=32",
         "preset.steps=2", "preset.warmup=0", "preset.iters=1", "bench.flops.enabled=false"]


@pytest.fixture
def cache(tmp_path):
    return f"baseline.cache_dir={tmp_path / 'baselines'}"


def test_tiny_flux2_klein_end_to_end_passes_with_images_and_phases(cli, cache):
    result, job = cli(*QUICK, cache)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = read_record(job)
    assert record["status"] == "ok" and record["verdict"] == "PASS", record.get("error")
    assert record["baseline"]["process"] == "child"
    assert record["job"]["primary"] == {"output": "image", "error": "mean_rel_err",
                                        "psnr": "image_psnr_db", "ssim": "image_ssim"}
    assert record["inputs"]["latents"]["shape"] == [1, 16, 8, 8]
    metrics = record["metrics"]
    assert metrics["image_psnr_db"]["verdict"] == metrics["image_ssim"]["verdict"] == "PASS"
    assert record["bench"]["throughput"]["unit"] == "images/s"
    assert set(record["bench"]["phases"]) >= {"text_encoding", "denoiser", "vae_decode"}
    for key in ("image_device_png", "image_reference_png"):
        assert all((job / path).stat().st_size > 0 for path in record["artifacts"][key])


def test_a_pipeline_returning_black_images_fails(cli, cache, monkeypatch):
    real = Flux2KleinPipeline.__call__

    def black(self, *args, **kwargs):  # the device run only: the reference runs in a child
        out = real(self, *args, **kwargs)
        out.images = torch.zeros_like(out.images)
        return out

    monkeypatch.setattr(Flux2KleinPipeline, "__call__", black)
    result, job = cli(*QUICK, cache)
    record = read_record(job)
    assert record["verdict"] == "FAIL"
    assert record["metrics"]["image_psnr_db"]["verdict"] == "FAIL"


SECTION_4 = ("python -m ascendbench model=flux2_klein model.source=<klein dir> "
             "model.decoders.small.source=<dir> model.weights=required device=npu dtype=float16 "
             "preset=quality")


def test_the_readme_recipe_of_the_seeds_section_4_runs_on_the_twin(cli, cache):
    readme_recipe([SECTION_4, "python -m ascendbench -m +sweep=flux2_decoder_swap device=npu "
                   "dtype=float16 model.decoders.small.source=<dir> "
                   "model.decoders.standard.source=<klein dir> model.weights=required"])
    args = tiny(SECTION_4, {"<klein dir>": "null", "<dir>": "null"},
                [*QUICK, "model.weights=random", "dtype=float32"])
    result, job = cli(*args, cache)
    record = read_record(job)
    assert record["verdict"] == "PASS", record.get("error")
    assert record["job"]["preset"] == "quality" and record["config"]["model"]["vae"] == "small"
    assert record["config"]["model"]["task"]["call_kwargs"]["guidance_scale"] == 1.0
