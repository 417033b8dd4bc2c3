"""``metric.data_range``: one short key sets the PSNR/SSIM range of every evaluator."""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate

from helpers import compose_config


def _suite(*overrides):
    cfg = compose_config(["model=tiny_flux2_decoder", "metric=image", *overrides])
    return instantiate(cfg.metric)


def _psnrs(suite):
    generator = torch.Generator().manual_seed(0)
    reference = torch.rand(1, 3, 16, 16, generator=generator) * 2 - 1
    device = (reference + 0.01 * torch.randn(1, 3, 16, 16, generator=generator)).clamp(-1, 1)
    metrics = suite.evaluate({"image": reference}, {"image": device}, {}, atol=1e-5, rtol=1e-3)
    mse = float(((reference.double() - device.double()) ** 2).mean())
    return metrics["psnr_db"]["value"], metrics["image_psnr_db"]["value"], mse


def test_the_short_key_sets_every_evaluators_range():
    default_regression, default_image, mse = _psnrs(_suite())
    regression, image, _ = _psnrs(_suite("metric.data_range=1.0"))
    assert math.isclose(regression, 10 * math.log10(1.0 / mse), rel_tol=1e-9)
    assert math.isclose(default_regression - regression, 20 * math.log10(2), rel_tol=1e-6)
    follows = math.isclose(default_image - image, 20 * math.log10(2), rel_tol=1e-6)
    assert follows, "the image PSNR follows too"


def test_the_seed_recipe_key_composes_for_the_flux2_sweep():
    cfg = compose_config(["+sweep=flux2_accuracy", "metric.data_range=1.0"])
    assert cfg.metric.data_range == 1.0
