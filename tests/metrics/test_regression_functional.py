"""Regression metrics against hand-computed values, NaN/Inf rules and chunk invariance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ascendbench.errors import MetricError
from ascendbench.metrics.functional.regression import ErrorTolerances, psnr_db, regression_metrics

REF = torch.tensor([1.0, -2.0, 4.0, 0.5])
DEV = torch.tensor([1.1, -2.0, 3.0, 0.5])


def test_each_metric_on_a_hand_built_pair():
    tolerances = ErrorTolerances(eps=0.0, small_value=0.0, atol=0.0, rtol=0.05)
    m = regression_metrics(REF, DEV, tolerances, data_range=4.0)
    diffs = np.array([0.1, 0.0, 1.0, 0.0])
    assert m["mae"] == pytest.approx(diffs.mean())
    assert m["mse"] == pytest.approx((diffs**2).mean())
    assert m["rmse"] == pytest.approx(math.sqrt((diffs**2).mean()))
    assert m["max_abs_err"] == pytest.approx(1.0)
    rel = diffs / np.array([1.0, 2.0, 4.0, 0.5])          # 0.1, 0, 0.25, 0
    assert m["mean_rel_err"] == pytest.approx(rel.mean())
    assert m["max_rel_err"] == pytest.approx(0.25)
    assert m["one_thousandth_err_ratio"] == pytest.approx(0.5)  # rel < 1e-3: the two exact elements
    assert m["five_thousandths_err_ratio"] == pytest.approx(0.5)
    ref, dev = REF.double().numpy(), DEV.double().numpy()
    assert m["cosine"] == pytest.approx(ref @ dev / np.linalg.norm(ref) / np.linalg.norm(dev))
    assert m["psnr_db"] == pytest.approx(10 * math.log10(16 / (diffs**2).mean()))
    # isclose(dev, ref, rtol=0.05): |0.1| > 0.05*1 and |1| > 0.05*4 -> 2 of 4 mismatch
    assert m["allclose_mismatch_ratio"] == pytest.approx(0.5)
    assert m["error_balance"] == pytest.approx(0.0)  # one element above, one below
    assert m["nonfinite_mismatch"] == 0 and m["numel"] == 4


def test_error_balance_measures_a_one_sided_bias():
    assert regression_metrics(REF, REF + 0.01)["error_balance"] == pytest.approx(1.0)
    assert regression_metrics(REF, REF)["error_balance"] == 0.0


def test_small_values_are_judged_by_the_absolute_tolerance_not_relatively():
    ref = torch.tensor([1e-5, 2e-5, 1.0, 2.0])
    dev = torch.tensor([2e-5, 2e-5 + 1e-7, 1.0, 2.0])   # huge relative error on the tiny elements
    tolerances = ErrorTolerances(small_value=1e-3, small_value_atol=1e-6, eps=0.0)
    m = regression_metrics(ref, dev, tolerances)
    assert m["mean_rel_err"] == 0.0 and m["max_rel_err"] == 0.0  # only the large elements count
    assert m["small_value_err_ratio"] == pytest.approx(0.5)  # 1e-5 > 1e-6 fails, 1e-7 passes
    everything = regression_metrics(ref, dev, ErrorTolerances(small_value=0.0, eps=0.0))
    assert everything["max_rel_err"] == pytest.approx(1.0)             # 1e-5 / 1e-5


def test_eps_pads_the_relative_error_denominator():
    m = regression_metrics(torch.tensor([0.0, 1.0]), torch.tensor([1e-6, 1.0]),
                           ErrorTolerances(eps=1e-6, small_value=0.0))
    assert m["max_rel_err"] == pytest.approx(1.0)


def test_psnr_has_an_explicit_range_and_a_cap_for_identical_tensors():
    assert psnr_db(0.01, data_range=2.0, cap_db=200.0) == pytest.approx(10 * math.log10(4 / 0.01))
    assert regression_metrics(REF, REF, psnr_cap_db=123.0)["psnr_db"] == 123.0
    assert regression_metrics(REF, REF)["cosine"] == pytest.approx(1.0)


def test_nan_or_inf_on_the_device_where_the_reference_is_finite_is_counted():
    dev = DEV.clone()
    dev[0], dev[2] = float("nan"), float("inf")
    m = regression_metrics(REF, dev)
    assert m["nonfinite_mismatch"] == 2 and m["dev_nonfinite"] == 2 and m["ref_nonfinite"] == 0
    assert m["max_abs_err"] == 0.0, "the finite pairs (all equal) still give their statistics"


def test_matching_nonfinite_values_are_consistent_and_different_kinds_are_not():
    ref = torch.tensor([float("nan"), float("inf"), float("-inf"), 1.0])
    assert regression_metrics(ref, ref.clone())["nonfinite_mismatch"] == 0
    swapped = torch.tensor([float("inf"), float("-inf"), float("-inf"), 1.0])
    assert regression_metrics(ref, swapped)["nonfinite_mismatch"] == 2


def test_all_nan_device_output_gives_nan_statistics():
    m = regression_metrics(REF, torch.full_like(REF, float("nan")))
    assert math.isnan(m["mae"]) and math.isnan(m["cosine"]) and m["nonfinite_mismatch"] == 4


def test_chunked_equals_unchunked_on_a_bfloat16_device_tensor():
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(3, 5, 7, 11, generator=generator, dtype=torch.float64)
    noise = 1e-3 * torch.randn(ref.shape, generator=generator, dtype=torch.float64)
    dev = (ref + noise).to(torch.bfloat16)
    whole = regression_metrics(ref, dev, chunk_elements=10**9)
    chunked = regression_metrics(ref, dev, chunk_elements=37)
    for name, value in whole.items():
        assert chunked[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def test_shape_mismatch_is_a_metric_error():
    with pytest.raises(MetricError, match="shape mismatch"):
        regression_metrics(torch.zeros(2, 3), torch.zeros(3, 2))


def test_allclose_mismatch_equals_torch_isclose_with_nans_and_infs():
    generator = torch.Generator().manual_seed(3)
    ref = torch.randn(1000, generator=generator, dtype=torch.float64)
    dev = ref + 1e-3 * torch.randn(1000, generator=generator, dtype=torch.float64)
    ref[:5], dev[3:8] = float("nan"), float("inf")
    ref[10], dev[10] = float("-inf"), float("-inf")
    close = torch.isclose(dev, ref, atol=1e-4, rtol=1e-3, equal_nan=True)
    expected = float((~close).double().mean())
    tolerances = ErrorTolerances(atol=1e-4, rtol=1e-3)
    got = regression_metrics(ref, dev, tolerances, chunk_elements=97)["allclose_mismatch_ratio"]
    assert got == pytest.approx(expected, rel=1e-12)


def test_finite_values_whose_sum_overflows_are_still_finite_pairs():
    ref = torch.tensor([1e308, 1e308, 1.0], dtype=torch.float64)
    m = regression_metrics(ref, ref.clone())
    assert m["nonfinite_mismatch"] == 0 and m["max_abs_err"] == 0.0 and m["dev_nonfinite"] == 0
