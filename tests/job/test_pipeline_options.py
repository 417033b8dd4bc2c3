"""The record's ``pipeline`` section: the options in force during the device run, read from
the placed model and what the task applied, on the tiny T2V pipeline and a tiny VAE."""

from __future__ import annotations

from types import SimpleNamespace

from ascendbench.job.stages.device_run import pipeline_options

from helpers import compose_config, run_job

QUICK = ["device=cpu", "preset.warmup=0", "preset.iters=1", "bench.flops.enabled=false",
         "baseline.enabled=false",
         "compare.visual.enabled=false", "artifacts.media=false"]


def _record(tmp_path, *overrides: str) -> dict:
    record = run_job(compose_config([*overrides, *QUICK]), tmp_path / "job")
    assert record["status"] == "ok", record.get("error")
    return record


def test_the_t2v_twin_records_offload_vae_switches_and_the_attention_backend_in_force(tmp_path):
    record = _record(tmp_path, "model=tiny_ltx_t2v", "preset.height=32", "preset.width=32",
                     "preset.steps=1",
                     "model.task.vae.enable_tiling=true",
                     "+model.task.vae.tiling.tile_sample_min_height=64",
                     # asked for, but nothing to offload to on a CPU: not in force
                     "model.task.cpu_offload=true",
                     "model.patches=[{name: diffusers_attention_backend, backend: _native_math, "
                     "devices: [cpu]}]")
    assert record["pipeline"] == {
        "cpu_offload": False, "vae_slicing": False, "vae_tiling": True,
        "vae_tiling_options": {"tile_sample_min_height": 64},
        "attention_backend": "_native_math", "attention_processors": ["LTXVideoAttnProcessor"],
        "patches_applied": ["diffusers_attention_backend"]}


def test_without_a_patch_the_dispatchers_default_backend_is_recorded(tmp_path):
    record = _record(tmp_path, "model=tiny_ltx_t2v", "preset.height=32", "preset.width=32",
                     "preset.steps=1",
                     "model.patches=[]")
    pipeline = record["pipeline"]
    assert pipeline["attention_backend"] == "native" and pipeline["patches_applied"] == []
    assert (pipeline["vae_slicing"], pipeline["vae_tiling"],
            pipeline["cpu_offload"]) == (False, False, False)


def test_a_video_vae_records_its_slicing_and_an_image_vae_its_own_processors(tmp_path):
    video = _record(tmp_path / "video", "model=tiny_ltx_video_vae", "preset.height=64",
                    "preset.width=64",
                    "model.task.vae.enable_slicing=true")["pipeline"]
    assert (video["vae_slicing"], video["vae_tiling"], video["attention_backend"]) == (True, False,
                                                                                       None)
    image = _record(tmp_path / "image", "model=tiny_flux2_decoder", "preset.height=32",
                    "preset.width=32")["pipeline"]
    # torch SDPA called directly, not through diffusers' dispatcher
    assert image["attention_processors"] == ["AttnProcessor2_0"]
    assert image["attention_backend"] is None
    assert image["vae_slicing"] is False and image["cpu_offload"] is False


def test_offload_comes_from_what_the_task_applied_and_a_model_without_vae_has_no_switches():
    task = SimpleNamespace(applied_options=lambda: {"cpu_offload": True})
    options = pipeline_options(task, SimpleNamespace(), [{"name": "p", "skipped": "not on cpu"}])
    assert options["cpu_offload"] is True and options["patches_applied"] == []
    assert options["vae_slicing"] is None
    assert options["vae_tiling"] is None
    assert options["attention_processors"] == []
