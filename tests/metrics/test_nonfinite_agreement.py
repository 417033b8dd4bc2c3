"""The non-finite agreement rule, defined once (metrics/functional/nonfinite.py) and followed by
every metric suite, the reference check (a reference with NaN/Inf FAILs in every suite) and the
output validation.

Adversarial cases: "a cached reference with 31 % NaN/Inf elements gives PASS" (every suite) and
"both sides overflowing in the same places makes max_abs_err/cosine NaN -> FAIL while
nonfinite_mismatch says 0"."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from ascendbench.metrics.functional.nonfinite import (
    max_abs_diff,
    mismatch_mask,
    neutralize,
    nonfinite_counts,
    scalars_agree,
)
from ascendbench.metrics.functional.regression import regression_metrics
from ascendbench.metrics.image import ImageEvaluator, VideoEvaluator
from ascendbench.metrics.output_checks import inspect, output_checks, validate_reference
from ascendbench.metrics.verdict import worst

NAN, INF = float("nan"), float("inf")


def _pair(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ref = torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1
    return ref, (ref + 1e-4).float()


def _suite_pair(option: str) -> tuple[dict, dict]:
    """Outputs of the kind the option compares, the reference with 31 % NaN/Inf."""
    shape = {"video": (1, 3, 2, 16, 16)}.get(option, (1, 3, 16, 16))
    ref, dev = _pair(shape)
    flat = ref.view(-1)
    count = int(0.31 * flat.numel())
    flat[:count:2], flat[1:count:2] = NAN, INF
    refs, devs = {"image": ref}, {"image": dev}
    if option == "tokens":
        ids = torch.arange(12).reshape(1, 3, 4)
        refs, devs = {**refs, "tokens": ids}, {**devs, "tokens": ids.clone()}
    return refs, devs


@pytest.mark.parametrize("option", ["regression", "image", "video", "tokens"])
def test_reference_with_nonfinite_elements_fails_in_every_metric_suite(compose_cfg, option,
                                                                       tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # no LPIPS backbone: skipped, not downloaded
    suite = instantiate(compose_cfg([f"metric={option}"]).metric)
    ref, dev = _suite_pair(option)
    out = suite.evaluate(ref, dev, {"cosine": {"min": 0.99}}, atol=1e-5, rtol=1e-3)
    name = "image/reference_nonfinite" if len(ref) > 1 else "reference_nonfinite"
    entry = out[name]
    assert entry["verdict"] == "FAIL" and entry["value"] == int(0.31 * ref["image"].numel())
    assert entry["fraction"] == pytest.approx(0.31, abs=2e-3)
    assert entry["first_index"] == [0] * ref["image"].dim()
    assert worst(e.get("verdict") for e in out.values()) == "FAIL"
    integers = [k for k in out if k.endswith("tokens/reference_nonfinite")]
    assert not integers, "integer outputs are always finite"


def test_overflow_in_the_same_places_gives_the_statistics_of_identical_tensors():
    ref = torch.full((2, 3), INF, dtype=torch.float64)
    ref[0, 0] = NAN
    m = regression_metrics(ref, ref.float())
    assert m["nonfinite_mismatch"] == 0
    assert (m["max_abs_err"], m["mae"], m["cosine"], m["psnr_db"]) == (0.0, 0.0, 1.0, 200.0)
    assert m["ref_nonfinite"] == m["dev_nonfinite"] == 6


def test_partial_overflow_in_the_same_places_leaves_the_finite_pairs_statistics_alone():
    ref, dev = _pair((64,))
    clean = regression_metrics(ref[8:], dev[8:])
    ref[:8], dev[:8] = INF, INF
    m = regression_metrics(ref, dev)
    assert m["nonfinite_mismatch"] == 0
    for name in ("mae", "max_abs_err", "cosine", "rmse"):
        assert m[name] == pytest.approx(clean[name], rel=1e-12), name


def test_a_mismatch_with_no_finite_pair_left_gives_nan_statistics_that_fail():
    m = regression_metrics(torch.ones(3), torch.full((3,), NAN))
    assert m["nonfinite_mismatch"] == 3 and math.isnan(m["cosine"]) and math.isnan(m["max_abs_err"])


def test_reference_nonfinite_against_a_finite_device_value_is_a_mismatch():
    m = regression_metrics(torch.tensor([NAN, 1.0, -INF]), torch.tensor([0.5, 1.0, -INF]))
    assert m["nonfinite_mismatch"] == 1 and m["allclose_mismatch_ratio"] == pytest.approx(1 / 3)


def test_the_rule_against_numpy():
    generator = np.random.default_rng(0)
    values = np.array([NAN, INF, -INF, 0.0, 1.0])
    ref, dev = generator.choice(values, 500), generator.choice(values, 500)
    both_finite = np.isfinite(ref) & np.isfinite(dev)
    agreeing = (np.isnan(ref) & np.isnan(dev)) | (np.isinf(ref) & (ref == dev))
    counts = nonfinite_counts(torch.from_numpy(ref), torch.from_numpy(dev))
    assert counts.finite_pairs == both_finite.sum() and counts.agreeing == agreeing.sum()
    assert counts.mismatch == (~(both_finite | agreeing)).sum()
    assert mismatch_mask(torch.from_numpy(ref), torch.from_numpy(dev)).numpy().tolist() == \
        (~(both_finite | agreeing)).tolist()
    assert regression_metrics(torch.from_numpy(ref), torch.from_numpy(dev), chunk_elements=37)[
        "nonfinite_mismatch"] == counts.mismatch


def test_max_abs_diff_follows_the_rule():
    a = torch.tensor([INF, NAN, 1.0, -INF])
    assert max_abs_diff(a, a.clone()) == 0.0
    assert not torch.equal(a, a.clone()), "torch.equal calls two NaN different: not our rule"
    assert max_abs_diff(a, torch.tensor([INF, NAN, 1.25, -INF])) == 0.25
    assert max_abs_diff(a, torch.tensor([INF, NAN, 1.0, INF])) == math.inf
    assert max_abs_diff(a, torch.tensor([INF, 0.0, 1.0, -INF])) == math.inf
    assert max_abs_diff(torch.full((2,), INF), torch.full((2,), INF)) == 0.0


def test_scalars_and_neutralize():
    assert scalars_agree(NAN, None) is True and scalars_agree(INF, -INF) is False
    assert scalars_agree(1.0, 1.5) is None
    ref, dev, bad = neutralize(torch.tensor([INF, NAN, 0.25]), torch.tensor([INF, 1.0, 0.5]))
    assert ref.tolist() == [0.0, 0.0, 0.25] and dev.tolist() == [0.0, 0.0, 0.5] and bad == 1


def test_image_metrics_leave_agreeing_nan_out_and_count_the_mismatches():
    ref, dev = _pair((2, 3, 16, 16))
    ref[0, :, :2], dev[0, :, :2] = NAN, NAN  # the same NaN rows on both sides
    rules = {"image_psnr_db": {"min": 30}}
    out = ImageEvaluator(lpips=False).evaluate({"x": ref}, {"x": dev}, rules, 1e-5, 1e-5)
    assert out["image_psnr_db"]["verdict"] == "PASS" and not math.isnan(out["image_ssim"]["value"])
    mismatch = out["image_nonfinite_mismatch"]
    assert mismatch["value"] == 0 and mismatch["verdict"] == "PASS"
    dev[1, 0, 0, 0] = INF
    out = ImageEvaluator(lpips=False, thresholds={"image_nonfinite_mismatch": None}).evaluate(
        {"x": ref}, {"x": dev}, {}, 1e-5, 1e-5)
    mismatch = out["image_nonfinite_mismatch"]
    assert mismatch["value"] == 1 and mismatch["verdict"] == "FAIL"


def test_video_metrics_follow_the_same_rule_frame_chunk_by_chunk():
    ref, dev = _pair((1, 3, 5, 16, 16))
    ref[0, :, 1], dev[0, :, 1] = INF, INF  # frame 1 overflows on both sides
    dev[0, 0, 3, 0, 0] = NAN  # one pixel of frame 3 on the device only
    evaluator = VideoEvaluator(lpips=False, frames_per_chunk=2)
    out = evaluator.evaluate({"v": ref}, {"v": dev}, {}, 1e-5, 1e-5)
    mismatch = out["video_nonfinite_mismatch"]
    assert mismatch["value"] == 1 and mismatch["verdict"] == "FAIL"
    per_frame = out["video_psnr_db_mean"]["per_frame"]
    assert per_frame[1] == 200.0 and all(math.isfinite(v) for v in per_frame)


def test_inspect_is_chunk_independent_and_matches_numpy():
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(7, 11, 13, generator=generator) * 1.5
    x.view(-1)[[5, 400, 900]] = torch.tensor([NAN, INF, -INF])
    whole = inspect(x, (-1.0, 1.0), chunk_elements=10**9)
    chunked = inspect(x, (-1.0, 1.0), chunk_elements=31)
    assert whole == chunked
    array = x.numpy()
    finite = array[np.isfinite(array)]
    assert whole.nonfinite == 3 and whole.first_nonfinite == [0, 0, 5]
    assert whole.out_of_range == int(((finite < -1) | (finite > 1)).sum())
    assert (whole.low, whole.high) == (float(finite.min()), float(finite.max()))


def _ranged(value_range):
    """A task declaring ``value_range`` for every output."""
    return SimpleNamespace(output_range=lambda name, tensor: value_range, video_layout="BCTHW",
                           natural_outputs=True)


def test_output_validation_entries_and_the_range_rule_can_be_overridden():
    outputs = {"image": torch.tensor([[0.5, 1.2], [NAN, -0.1]]), "ids": torch.tensor([1, 2])}
    found = output_checks(outputs, _ranged((-1.0, 1.0)), None)
    assert set(found) == {"image/output_nonfinite", "image/output_out_of_range_ratio"}
    nonfinite = found["image/output_nonfinite"]
    assert nonfinite["verdict"] == "FAIL" and nonfinite["value"] == 1
    ratio = found["image/output_out_of_range_ratio"]
    assert ratio["value"] == pytest.approx(1 / 3)
    assert ratio["verdict"] == "WARN" and ratio["count"] == 1
    strict = output_checks(outputs, _ranged((-1.0, 1.0)), None,
                           {"output_out_of_range_ratio": {"max": 0.0, "source": "model"}})
    assert strict["image/output_out_of_range_ratio"]["verdict"] == "FAIL"
    assert "image/output_out_of_range_ratio" not in output_checks(outputs, _ranged(None), None)


def test_reference_validation_passes_a_finite_reference():
    entry = validate_reference({"x": torch.zeros(3)})["reference_nonfinite"]
    assert entry["value"] == 0 and entry["verdict"] == "PASS" and entry["first_index"] is None


def test_the_task_declares_the_range_of_its_image_and_video_outputs_only():
    from ascendbench.tasks.layer_forward import LayerForwardTask
    from ascendbench.tasks.vae_decode import VaeDecodeTask

    decode = VaeDecodeTask(latent_channels=4, spatial_compression=2)
    assert decode.output_range("image", torch.zeros(1, 3, 8, 8)) == (-1.0, 1.0)
    latent = decode.output_range("latent", torch.zeros(1, 4, 8))
    assert latent is None, "not shaped like the task's images"
    assert decode.output_range("ids", torch.zeros(1, 3, 8, 8, dtype=torch.long)) is None
    layer = LayerForwardTask(input_shape=[1, 2])
    assert layer.output_range("output", torch.zeros(1, 3, 8, 8)) is None
