"""The facts the seed reports printed are fields of a default tiny job's record, listed in one
place: the job's sizes (frames and steps where the task uses them), the environment, input/output
summaries and the pipeline options in force."""

from __future__ import annotations

import ascendbench

from helpers import TINY_RUN, compose_config, read_record, run_job

ENV_FIELDS = ("ascendbench", "git_revision", "git_dirty", "cann", "cann_source", "drivers",
              "torch_build",
              "libraries", "device")
LIBRARIES = ("torch", "torch_npu", "diffusers", "transformers", "accelerate", "peft", "hydra-core")
SUMMARY_FIELDS = ("shape", "dtype", "sha256", "mean", "std", "min", "max", "first", "last")
OUTPUT_FIELDS = tuple(f for f in SUMMARY_FIELDS if f != "sha256")
PIPELINE_FIELDS = ("cpu_offload", "vae_slicing", "vae_tiling", "vae_tiling_options",
                   "attention_backend",
                   "attention_processors", "patches_applied")


def _summaries_complete(section: dict, fields: tuple[str, ...]) -> None:
    assert section, "at least one tensor"
    for name, summary in section.items():
        missing = [f for f in fields if f not in summary]
        assert not missing, f"{name} lacks {missing}"
        assert summary["min"] <= summary["mean"] <= summary["max"] and summary["std"] >= 0
        assert summary["first"], f"{name} has a preview"


def test_a_default_tiny_jobs_record_has_every_fact_the_seeds_printed(cli):
    result, job = cli("model=tiny_flux2_decoder", *TINY_RUN, "baseline.process=in-process")
    assert result.returncode == 0, result.output[-3000:]
    record = read_record(job)

    assert record["job"]["sizes"] == {"batch_size": 1, "height": 32, "width": 32}
    assert "num_frames" not in record["job"]
    assert "steps" not in record["job"], "an image decode uses neither"

    env = record["env"]
    assert [f for f in ENV_FIELDS if f not in env] == []
    assert env["ascendbench"] == ascendbench.__version__
    assert env["git_revision"] is None or (len(env["git_revision"]) == 40
                                           and isinstance(env["git_dirty"], bool))
    assert set(LIBRARIES) <= set(env["libraries"]) and env["libraries"]["torch"]
    assert {"cuda", "git_version"} <= set(env["torch_build"])
    assert env["device"]["total_memory_gb"] > 0, "device memory capacity"

    _summaries_complete(record["inputs"], SUMMARY_FIELDS)
    _summaries_complete(record["outputs"], OUTPUT_FIELDS)
    assert [f for f in PIPELINE_FIELDS if f not in record["pipeline"]] == []


def test_a_tiny_video_pipeline_records_frames_steps_and_its_options(tmp_path):
    cfg = compose_config(["model=tiny_ltx_t2v", "preset.height=32", "preset.width=32",
                          "preset.steps=2",
                          "device=cpu", "preset.warmup=0", "preset.iters=1",
                          "bench.flops.enabled=false",
                          "baseline.enabled=false", "compare.visual.enabled=false",
                          "artifacts.media=false"])
    record = run_job(cfg, tmp_path / "job")
    assert record["status"] == "ok", record["error"]
    assert (record["job"]["num_frames"], record["job"]["steps"]) == (9, 2)
    assert {"height": 32, "width": 32, "num_frames": 9,
            "steps": 2}.items() <= record["job"]["sizes"].items()
    _summaries_complete(record["outputs"], OUTPUT_FIELDS)
    pipeline = record["pipeline"]
    assert [f for f in PIPELINE_FIELDS if f not in pipeline] == []
    assert pipeline["cpu_offload"] is False
    assert pipeline["vae_slicing"] is False
    assert pipeline["attention_backend"]
