"""Video metrics: per frame equal to the image metrics, chunked equal to unchunked, worst found."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.functional.image import resolve_layout
from ascendbench.metrics.image import ImageEvaluator, VideoEvaluator


def _videos(b=2, c=3, t=5, h=24, w=20, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ref = torch.rand(b, c, t, h, w, generator=generator) * 2 - 1
    dev = (ref + 0.03 * torch.randn(ref.shape, generator=generator)).clamp(-1, 1)
    dev[1, :, 3] = -ref[1, :, 3]    # video 1, frame 3: the worst frame
    return ref, dev


def _evaluate(evaluator, ref, dev):
    return evaluator.evaluate({"video": ref}, {"video": dev}, {}, atol=1e-5, rtol=1e-3)


def test_chunked_video_metrics_equal_unchunked_ones():
    ref, dev = _videos()
    one = _evaluate(VideoEvaluator(lpips=False, frames_per_chunk=1), ref, dev)
    whole = _evaluate(VideoEvaluator(lpips=False, frames_per_chunk=1000), ref, dev)
    assert one.keys() == whole.keys()
    for name, entry in whole.items():
        assert one[name]["value"] == pytest.approx(entry["value"], rel=1e-12), name


def test_per_frame_values_equal_the_image_metrics_of_each_frame_and_the_worst_is_located():
    ref, dev = _videos()
    out = _evaluate(VideoEvaluator(lpips=False, frames_per_chunk=2), ref, dev)
    frames_ref = ref.permute(0, 2, 1, 3, 4).reshape(-1, 3, 24, 20)
    frames_dev = dev.permute(0, 2, 1, 3, 4).reshape(-1, 3, 24, 20)
    images = ImageEvaluator(lpips=False).evaluate({"f": frames_ref}, {"f": frames_dev}, {},
                                                  atol=1e-5, rtol=1e-3)
    psnr, ssim = images["image_psnr_db"]["per_image"], images["image_ssim"]["per_image"]
    assert out["video_psnr_db_mean"]["per_frame"] == pytest.approx(psnr, rel=1e-12)
    assert out["video_ssim_mean"]["per_frame"] == pytest.approx(ssim, rel=1e-12)
    psnr = np.array(images["image_psnr_db"]["per_image"])
    assert out["video_psnr_db_mean"]["value"] == pytest.approx(psnr.mean())
    assert out["video_psnr_db_std"]["value"] == pytest.approx(psnr.std())
    assert out["video_psnr_db_min"]["value"] == pytest.approx(psnr.min())
    assert out["video_psnr_db_min"]["worst_frame"] == {"batch": 1, "frame": 3}
    assert out["video_ssim_min"]["worst_frame"] == {"batch": 1, "frame": 3}
    assert out["video_psnr_db_mean"]["frames"] == 10


def test_btchw_layout_gives_the_same_numbers():
    ref, dev = _videos()
    bcthw = _evaluate(VideoEvaluator(lpips=False), ref, dev)
    btchw = _evaluate(VideoEvaluator(lpips=False, layout="BTCHW"), ref.transpose(1, 2).contiguous(),
                      dev.transpose(1, 2).contiguous())
    for name in ("video_psnr_db_mean", "video_ssim_mean", "video_psnr_db_min"):
        assert btchw[name]["value"] == pytest.approx(bcthw[name]["value"], rel=1e-12)


def test_layout_auto_and_its_errors():
    assert resolve_layout((1, 3, 9, 8, 8), "auto") == "BCTHW"
    assert resolve_layout((1, 9, 3, 8, 8), "auto") == "BTCHW"
    with pytest.raises(MetricError, match="channel axis"):
        resolve_layout((1, 8, 9, 8, 8), "auto")
    with pytest.raises(MetricError, match="5-D"):
        resolve_layout((1, 3, 8, 8), "auto")


def test_lpips_without_backbone_is_skipped_for_every_aggregate(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    ref, dev = _videos(h=32, w=32, t=4, b=2)
    out = _evaluate(VideoEvaluator(), ref, dev)
    for name in ("video_lpips_mean", "video_lpips_max", "video_lpips_std"):
        assert "alexnet" in out[name]["skipped"]


def test_a_model_without_video_outputs_gets_a_skipped_entry():
    image = {"image": torch.zeros(1, 3, 8, 8)}
    out = VideoEvaluator().evaluate(image, image, {}, atol=1e-5, rtol=1e-3)
    assert list(out) == ["video"] and "5-D video outputs" in out["video"]["skipped"]
