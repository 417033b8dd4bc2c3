"""Metric options from config: models pick a default, the CLI wins, rules layer dtype < model <
metric."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from ascendbench.config import group_options
from ascendbench.errors import ConfigError, MetricError
from ascendbench.job.stages.evaluate import evaluate
from ascendbench.metrics.evaluators import FunctionEvaluator, RegressionEvaluator
from ascendbench.metrics.suite import MetricSuite
from ascendbench.metrics.verdict import judge, merge_rules, worst
from ascendbench.precision import Precision


def _image_pair():
    generator = torch.Generator().manual_seed(1)
    ref = torch.rand(1, 3, 16, 16, generator=generator, dtype=torch.float64) * 2 - 1
    return {"image": ref}, {"image": (ref + 0.001).float()}


def test_flux2_decoder_defaults_to_image_metrics_and_the_cli_wins(compose_cfg):
    assert compose_cfg([]).metric.name == "image"
    assert compose_cfg(["model=tiny_flux2_decoder"]).metric.name == "image"
    chosen = compose_cfg(["model=tiny_flux2_decoder", "metric=regression"])
    assert chosen.metric.name == "regression"
    assert list(compose_cfg(["metric=video"]).metric.evaluators) == ["regression", "video"]


@pytest.mark.parametrize("option", group_options("metric"))
def test_every_metric_option_instantiates_and_evaluates(compose_cfg, option, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # no LPIPS backbone: skipped, not downloaded
    suite = instantiate(compose_cfg([f"metric={option}"]).metric)
    assert isinstance(suite, MetricSuite) and "regression" in suite.evaluators
    ref, dev = _image_pair()
    out = suite.evaluate(ref, dev, {"cosine": {"min": 0.99}}, atol=1e-5, rtol=1e-3)
    assert out["cosine"]["verdict"] == "PASS"


def test_runner_evaluate_layers_dtype_model_and_metric_rules(compose_cfg):
    cfg = compose_cfg(["model=tiny_flux2_decoder", "dtype=float16", "metric=regression",
                       "+model.thresholds.cosine={min: 0.9999, source: model}",
                       "+metric.thresholds.mean_rel_err={max: 1e-9, source: cli}"])
    ref, dev = _image_pair()
    out = evaluate(cfg.metric, Precision.build(cfg, "cpu"), ref, dev)
    assert out["cosine"]["threshold"] == 0.9999 and out["cosine"]["source"] == "model"
    assert out["mean_rel_err"]["verdict"] == "FAIL" and out["mean_rel_err"]["source"] == "cli"
    assert out["nonfinite_mismatch"]["verdict"] == "PASS"


def test_the_dtype_small_value_reaches_the_evaluator(compose_cfg):
    ref = {"x": torch.tensor([1e-4, 1.0], dtype=torch.float64)}
    dev = {"x": torch.tensor([2e-4, 1.0])}
    # small_value 1e-3 vs 1e-6
    for dtype, judged_relatively in (("float16", False), ("float32", True)):
        cfg = compose_cfg(["model=tiny_flux2_decoder", f"dtype={dtype}", "metric=regression"])
        out = evaluate(cfg.metric, Precision.build(cfg, "cpu"), ref, dev)
        assert (out["max_rel_err"]["value"] > 0.9) is judged_relatively, dtype
        assert (out["small_value_err_ratio"]["value"] == 1.0) is not judged_relatively, dtype


def test_the_nan_rule_cannot_be_switched_off():
    ref = {"x": torch.ones(4)}
    dev = {"x": torch.tensor([1.0, float("nan"), 1.0, 1.0])}
    evaluator = RegressionEvaluator(thresholds={"nonfinite_mismatch": None})
    out = evaluator.evaluate(ref, dev, {}, atol=1e-5, rtol=1e-3)
    mismatch = out["nonfinite_mismatch"]
    assert mismatch["verdict"] == "FAIL" and "always fails" in mismatch["source"]
    assert worst(e.get("verdict") for e in out.values()) == "FAIL"


def test_several_outputs_are_prefixed_and_mismatched_names_fail():
    ref = {"a": torch.zeros(3), "b": torch.ones(3)}
    dev = {k: v.clone() for k, v in ref.items()}
    out = RegressionEvaluator().evaluate(ref, dev, {}, atol=1e-5, rtol=1e-3)
    assert "a/mae" in out and "b/cosine" in out
    with pytest.raises(MetricError, match="outputs differ"):
        RegressionEvaluator().evaluate(ref, {"a": torch.zeros(3)}, {}, atol=1e-5, rtol=1e-3)


def test_rules_and_verdicts():
    assert judge(0.006, {"max": 0.01, "warn": 0.005})["verdict"] == "WARN"
    assert judge(None, {"max": 0.01})["verdict"] == "FAIL"
    assert judge(0.5, {"min": 0.1})["rule"] == ">= 0.1"
    assert merge_rules({"a": {"max": 1}}, {"a": None}) == {}
    assert merge_rules({"a": {"max": 1}}, {"a": {"min": 2}}) == {"a": {"min": 2}}
    assert worst([]) is None and worst(["PASS", "FAIL", "WARN"]) == "FAIL"
    with pytest.raises(ConfigError, match="exactly one numeric bound"):
        merge_rules({"cosine": {"max": 1, "min": 0}})
    with pytest.raises(ConfigError, match="cosine"):
        merge_rules({"cosine": {"min": "high"}})


def test_a_metric_name_another_evaluator_produced_is_kept_under_the_evaluator_key():
    suite = MetricSuite("dup", {"a": RegressionEvaluator(), "b": RegressionEvaluator()})
    ref, dev = _image_pair()
    entries = suite.evaluate(ref, dev, {}, atol=1e-5, rtol=1e-3)
    assert "mean_rel_err" in entries and "b.mean_rel_err" in entries
    assert entries["b.mean_rel_err"]["value"] == entries["mean_rel_err"]["value"]


def test_a_prefixed_name_that_still_clashes_is_refused():
    squatter = FunctionEvaluator(name="x", function="torch.nn.functional.l1_loss",
                                 metric="b.mean_rel_err")
    suite = MetricSuite("dup", {"x": squatter, "a": RegressionEvaluator(),
                                "b": RegressionEvaluator()})
    ref, dev = _image_pair()
    with pytest.raises(MetricError, match="already produced"):
        suite.evaluate(ref, dev, {}, atol=1e-5, rtol=1e-3)


def test_an_output_name_that_does_not_exist_lists_names_and_shapes_not_the_references_dtype():
    """The float64 CPU reference's dtype is not what the task produced (a float32 output)."""
    suite = MetricSuite("one", {"a": RegressionEvaluator(outputs=["nothing"])})
    ref, dev = _image_pair()
    with pytest.raises(MetricError, match=r"output 'nothing' does not exist; the task produced: "
                                          r"image \[") as failure:
        suite.evaluate({k: v.double() for k, v in ref.items()}, dev, {}, atol=1e-5, rtol=1e-3)
    assert "float64" not in str(failure.value)
