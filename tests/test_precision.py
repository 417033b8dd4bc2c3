"""One precision per job: the dtype table, auto resolution, rules merged once, the reference
dtype."""

from __future__ import annotations

import pytest
import torch

from ascendbench.errors import ConfigError
from ascendbench.precision import TORCH_DTYPES, Precision, dtype_name, reference_dtype, torch_dtype


def test_names_and_dtypes_round_trip():
    assert all(dtype_name(dtype) == name for name, dtype in TORCH_DTYPES.items())
    with pytest.raises(ConfigError, match="allowed: float32, float16, bfloat16 or auto"):
        torch_dtype("float8")


@pytest.mark.parametrize("device, expected, reference", [("cpu", "float32", torch.float64),
                                                          ("cuda", "bfloat16", torch.float64),
                                                          ("npu", "bfloat16", torch.float64)])
def test_auto_is_resolved_for_the_device_with_its_own_tolerances(compose_cfg, device, expected,
                                                                 reference):
    precision = Precision.build(compose_cfg(["model=tiny_flux2_decoder"]), device)
    assert (precision.name, precision.requested, precision.reference) == (expected, "auto",
                                                                          reference)
    assert precision.dtype == TORCH_DTYPES[expected]
    expected_rtol = {"float32": 1.3e-6, "bfloat16": 1.6e-2}[expected]
    assert precision.allclose()["rtol"] == expected_rtol and "small_value" in precision.allclose()


def test_model_thresholds_override_the_dtype_rules(compose_cfg):
    cfg = compose_cfg(["model=tiny_flux2_decoder", "dtype=float16",
                       "+model.thresholds.cosine={min: 0.9999, source: m}"])
    precision = Precision.build(cfg, "cpu")
    assert precision.rules["cosine"]["min"] == 0.9999 and precision.rules["cosine"]["source"] == "m"
    assert precision.rules["mean_rel_err"]["max"] == 0.01, (
        "rules the model does not name stay the dtype's")


def test_reference_follows_baseline_settings(compose_cfg):
    cfg = compose_cfg(["dtype=float32", "baseline.reference=float32"])
    assert Precision.build(cfg, "cpu").reference == torch.float32
    assert Precision.build(compose_cfg(["baseline.enabled=false"]), "cpu").reference is None
    # auto: float64 for every device dtype (one reference per dtype sweep); the memory fallback is
    # the stage's
    assert {reference_dtype("auto", d) for d in TORCH_DTYPES.values()} == {torch.float64}
    assert reference_dtype("float32", torch.float16) == torch.float32
    assert reference_dtype("float64", torch.bfloat16) == torch.float64
    with pytest.raises(ConfigError, match="baseline.reference='float8'"):
        reference_dtype("float8", torch.float32)
