"""Artifacts of a job: bounded tensors, and a failing video encoder that loses nothing else."""

from __future__ import annotations

import types

import torch

from ascendbench import runner


def _video_task():
    return types.SimpleNamespace(output_kind="video", video_layout="BCTHW", value_range=(-1.0, 1.0))


def test_a_failing_encoder_is_recorded_and_the_tensors_are_kept(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no ffmpeg here")

    monkeypatch.setattr(runner, "video_artifacts", broken)
    video = {"video": torch.zeros(1, 3, 2, 8, 8)}
    artifacts = runner._save_artifacts(tmp_path, _video_task(), {"latent": torch.ones(2)}, video, video)
    assert artifacts["media_skipped"] == "RuntimeError: no ffmpeg here"
    assert (tmp_path / artifacts["device_outputs"]).is_file() and (tmp_path / artifacts["reference_outputs"]).is_file()
    assert "no ffmpeg here" in (tmp_path / "traceback.log").read_text()


def test_tensors_switched_off_write_none(tmp_path):
    video = {"video": torch.zeros(1, 3, 2, 8, 8)}
    artifacts = runner._save_artifacts(tmp_path, _video_task(), {}, video, None, {"tensors": False, "media": False})
    assert artifacts == {"tensors_skipped": "artifacts.tensors=false"}
    assert not any(tmp_path.iterdir())
