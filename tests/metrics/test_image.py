"""Image metrics against scikit-image called directly; LPIPS skipped offline and computed with a
backbone file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from ascendbench.metrics import lpips_net
from ascendbench.metrics.functional.image import psnr_per_image, ssim_per_image
from ascendbench.metrics.image import ImageEvaluator


def _pair(n=2, c=3, h=40, w=48, noise=0.05, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ref = torch.rand(n, c, h, w, generator=generator, dtype=torch.float64) * 2 - 1
    noise = noise * torch.randn(ref.shape, generator=generator, dtype=torch.float64)
    dev = (ref + noise).clamp(-1, 1)
    return ref, dev


def test_psnr_and_ssim_equal_scikit_image_called_directly():
    ref, dev = _pair()
    psnr = psnr_per_image(ref, dev, data_range=2.0, cap_db=200.0)
    ssim = ssim_per_image(ref, dev, data_range=2.0)
    for i in range(ref.shape[0]):
        r, d = ref[i].permute(1, 2, 0).numpy(), dev[i].permute(1, 2, 0).numpy()
        assert psnr[i] == pytest.approx(peak_signal_noise_ratio(r, d, data_range=2.0), rel=1e-12)
        expected = structural_similarity(r, d, data_range=2.0, channel_axis=-1,
                                         gaussian_weights=True, sigma=1.5,
                                         use_sample_covariance=False)
        assert ssim[i] == pytest.approx(expected, rel=1e-12)


def test_grey_images_use_the_single_channel():
    ref, dev = _pair(c=1)
    expected = structural_similarity(ref[0, 0].numpy(), dev[0, 0].numpy(), data_range=2.0,
                                     gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
    assert ssim_per_image(ref, dev, 2.0)[0] == pytest.approx(expected, rel=1e-12)


def test_evaluator_clamps_to_the_value_range_and_records_mean_and_worst():
    ref, dev = _pair(n=3)
    dev[1] = -ref[1]                            # the worst image
    dev[0] = dev[0] * 1.5                       # values outside [-1, 1]: clamped before comparing
    evaluator = ImageEvaluator(lpips=False)
    out = evaluator.evaluate({"image": ref.float()}, {"image": dev.float()}, {}, atol=1e-5,
                             rtol=1e-3)
    clamped = dev.float().double().clamp(-1, 1)
    expected = [peak_signal_noise_ratio(ref.float().double()[i].numpy(), clamped[i].numpy(),
                                        data_range=2.0) for i in range(3)]
    entry = out["image_psnr_db"]
    assert entry["per_image"] == pytest.approx(expected, rel=1e-12)
    assert entry["value"] == pytest.approx(np.mean(expected)) and entry["worst_index"] == 1
    assert "image_lpips" not in out and out["image_ssim"]["value"] < 1.0


def test_images_below_the_ssim_window_skip_ssim_with_the_reason():
    ref, dev = _pair(h=8, w=8)
    out = ImageEvaluator(lpips=False).evaluate({"x": ref}, {"x": dev}, {}, atol=1e-5, rtol=1e-3)
    assert "11 px Gaussian SSIM window" in out["image_ssim"]["skipped"]
    assert "value" in out["image_psnr_db"]


def test_lpips_is_skipped_with_the_fix_when_the_backbone_weights_are_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty_torch_home"))
    ref, dev = _pair(h=32, w=32)
    out = ImageEvaluator().evaluate({"image": ref}, {"image": dev}, {}, atol=1e-5, rtol=1e-3)
    reason = out["image_lpips"]["skipped"]
    assert "alexnet-owt-7be5be79.pth" in reason and "$TORCH_HOME/hub/checkpoints" in reason
    assert "never computed with a random backbone" in reason
    assert not (tmp_path / "empty_torch_home").exists(), "nothing may be downloaded or created"


@pytest.fixture(scope="module")
def seeded_alexnet_home(tmp_path_factory):
    """A TORCH_HOME holding a seeded (not ImageNet-trained) AlexNet state dict under torchvision's
    file name."""
    import torchvision

    home = tmp_path_factory.mktemp("torch_home")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        state = torchvision.models.alexnet().state_dict()
    path = home / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth"
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    return home


def test_lpips_of_identical_images_is_zero_and_of_different_ones_positive(seeded_alexnet_home,
                                                                           monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(seeded_alexnet_home))
    expected = seeded_alexnet_home / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth"
    assert lpips_net.backbone_file("alex") == expected
    ref, dev = _pair(n=2, h=32, w=40, noise=0.2)
    evaluator = ImageEvaluator(lpips_verify_hash=False)
    same = evaluator.evaluate({"image": ref}, {"image": ref.clone()}, {}, atol=1e-5, rtol=1e-3)
    assert same["image_lpips"]["per_image"] == pytest.approx([0.0, 0.0], abs=1e-6)
    differ = evaluator.evaluate({"image": ref}, {"image": dev}, {}, atol=1e-5, rtol=1e-3)
    assert all(v > 0 for v in differ["image_lpips"]["per_image"])


def test_a_backbone_file_that_fails_its_checksum_is_not_used(seeded_alexnet_home, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(seeded_alexnet_home))
    ref, dev = _pair(h=32, w=32)
    out = ImageEvaluator().evaluate({"image": ref}, {"image": dev}, {}, atol=1e-5, rtol=1e-3)
    assert "does not match the SHA256 prefix" in out["image_lpips"]["skipped"]


def test_lpips_skips_images_smaller_than_alexnet_accepts(seeded_alexnet_home, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(seeded_alexnet_home))
    ref, dev = _pair(h=16, w=40)
    evaluator = ImageEvaluator(lpips_verify_hash=False)
    out = evaluator.evaluate({"image": ref}, {"image": dev}, {}, atol=1e-5, rtol=1e-3)
    assert "smaller than the 31 px" in out["image_lpips"]["skipped"]
