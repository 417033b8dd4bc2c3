"""The artifacts stage: bounded tensors, and a failing video encoder that loses nothing else."""

from __future__ import annotations

import torch

from ascendbench.job.job import Job
from ascendbench.job.record import RecordWriter
from ascendbench.job.stages import artifacts as stage_module
from ascendbench.job.stages.artifacts import ArtifactsStage
from ascendbench.tasks.vae_decode import VideoDecodeTask


def _job(compose_cfg, tmp_path, *overrides):
    job = Job(cfg=compose_cfg(["model=tiny_ltx_video_vae", *overrides]), dir=tmp_path,
              writer=RecordWriter(tmp_path, {}))
    job.task = VideoDecodeTask(4, 2, 2)
    return job


def test_a_failing_encoder_is_recorded_and_the_tensors_are_kept(compose_cfg, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no ffmpeg here")

    monkeypatch.setattr(stage_module, "video_artifacts", broken)
    job = _job(compose_cfg, tmp_path)
    job.inputs, job.outputs = {"latent": torch.ones(2)}, {"video": torch.zeros(1, 3, 2, 8, 8)}
    job.reference = dict(job.outputs)
    artifacts = ArtifactsStage().run(job)["artifacts"]
    assert artifacts["media_skipped"] == "RuntimeError: no ffmpeg here"
    assert (tmp_path / artifacts["device_outputs"]).is_file()
    assert (tmp_path / artifacts["reference_outputs"]).is_file()
    assert "no ffmpeg here" in (tmp_path / "traceback.log").read_text()


def test_tensors_switched_off_write_none(compose_cfg, tmp_path):
    job = _job(compose_cfg, tmp_path, "artifacts.tensors=false", "artifacts.media=false")
    job.inputs, job.outputs = {}, {"video": torch.zeros(1, 3, 2, 8, 8)}
    assert ArtifactsStage().run(job)["artifacts"] == {"tensors_skipped": "artifacts.tensors=false"}
    assert [p.name for p in tmp_path.iterdir()] == [], "nothing written"


def test_artifacts_of_earlier_stages_are_kept(compose_cfg, tmp_path):
    job = _job(compose_cfg, tmp_path, "artifacts.media=false")
    job.inputs, job.outputs = {"latent": torch.ones(2)}, {"video": torch.zeros(1, 3, 2, 8, 8)}
    job.artifacts = {"compare_csv": "compare.csv"}
    artifacts = ArtifactsStage().run(job)["artifacts"]
    assert artifacts["compare_csv"] == "compare.csv"
    assert artifacts["inputs"] == "tensors/inputs.safetensors"
