"""The regression evaluator's options: bound to RegressionOptions, merged with the dtype's."""

from __future__ import annotations

import pytest
import torch

from ascendbench.metrics.evaluators import RegressionEvaluator, RegressionOptions
from ascendbench.metrics.functional.regression import ErrorTolerances, regression_metrics

REF = torch.tensor([1.0, -2.0, 4.0, 1e-4])
DEV = torch.tensor([1.1, -2.0, 3.0, 2e-4])


def test_options_are_the_config_keys_and_a_typo_is_named():
    evaluator = RegressionEvaluator(eps=0.0, data_range=4.0, chunk_elements=2, outputs=["x"])
    assert evaluator.options == RegressionOptions(eps=0.0, data_range=4.0, chunk_elements=2)
    assert evaluator.outputs == ["x"] and evaluator.name == "regression"
    with pytest.raises(TypeError, match="epss"):
        RegressionEvaluator(epss=0.0)


def test_own_small_value_wins_over_the_dtype_and_the_rest_comes_from_the_dtype():
    options = RegressionOptions(small_value=1e-3)
    given = {"atol": 1e-3, "rtol": 1e-2, "small_value": 1e-6, "small_value_atol": 1e-5}
    assert options.tolerances(given) == ErrorTolerances(eps=1e-6, atol=1e-3, rtol=1e-2,
                                                        small_value=1e-3, small_value_atol=1e-5)


def test_evaluate_gives_the_functional_values():
    evaluator = RegressionEvaluator(eps=0.0, data_range=4.0, small_value=1e-3)
    entries = evaluator.evaluate({"x": REF}, {"x": DEV}, {}, atol=1e-5, rtol=1e-3)
    tolerances = ErrorTolerances(eps=0.0, atol=1e-5, rtol=1e-3, small_value=1e-3)
    expected = regression_metrics(REF, DEV, tolerances, data_range=4.0)
    assert {k: e["value"] for k, e in entries.items()} == pytest.approx(expected)
