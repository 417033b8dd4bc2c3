"""The first divergent module is found inside a tiny decoder with one perturbed layer."""

from __future__ import annotations

import copy
import math

import torch

from ascendbench.compare.csvfile import write_compare_csv
from ascendbench.compare.hooks import capturing
from ascendbench.compare.layers import compare_layers, compare_modules, stats_rel_err
from ascendbench.tasks.vae_decode import VaeDecodeTask

from helpers import build_tiny_flux2

PERTURBED = "decoder.up_blocks.0.resnets.0.conv2"
RULE = {"input_max_rel_err": 0.1, "output_min_rel_err": 0.5,
        "statistics": ["max", "min", "mean", "l2norm"]}
TASK = VaeDecodeTask(latent_channels=4, spatial_compression=2)


def _run(model, spec, dtype):
    made = TASK.make_inputs({"height": 32, "width": 32, "batch_size": 1}, 42)
    inputs = {k: v.to(dtype) for k, v in made.items()}
    model = model.to(dtype)
    with capturing(model, spec) as capture:
        TASK.run(model, inputs)
    return capture


def _models():
    reference = build_tiny_flux2(seed=0)
    device = copy.deepcopy(reference)
    with torch.no_grad():
        device.get_submodule(PERTURBED).weight.mul_(4.0)
    return reference, device


def test_the_perturbed_layer_is_the_first_divergent_module():
    reference, device = _models()
    ref_stats = _run(reference, "all", torch.float64).modules
    dev_stats = _run(device, "all", torch.float32).modules
    rows, first = compare_modules(ref_stats, dev_stats, RULE)
    assert first is not None and first["module"] == f"{PERTURBED}#0", first
    assert first["input_rel_err"] < 0.1 < 0.5 < first["output_rel_err"]
    results = {row["name"]: row["result"] for row in rows}
    assert results[f"{PERTURBED}#0"] == "first_divergent"
    assert results["decoder.up_blocks.0.resnets.0#0"] == "diverged", "its parent diverges after it"
    assert results["decoder.conv_in#0"] == "ok"
    order = [row["name"] for row in rows]
    assert order.index(f"{PERTURBED}#0") < order.index("decoder.up_blocks.0.resnets.0#0")


def test_unperturbed_float32_does_not_diverge_from_float64():
    reference = build_tiny_flux2(seed=0)
    rows, first = compare_modules(_run(copy.deepcopy(reference), "all", torch.float64).modules,
                                  _run(reference, "all", torch.float32).modules, RULE)
    assert first is None and {row["result"] for row in rows} == {"ok"}


def test_pattern_captures_are_judged_layer_by_layer(tmp_path):
    reference, device = _models()
    spec = ["decoder.conv_in", "decoder.up_blocks[:1]", "decoder.up_blocks[-1]"]
    ref = _run(reference, spec, torch.float64)
    dev = _run(device, spec, torch.float32)
    rules = {"max_abs_err": {"max": 1e-3, "source": "test"},
             "cosine": {"min": 0.9999, "source": "test"}}
    captured = {"tensors": ref.tensors, "order": ref.order, "dropped": ref.dropped}
    rows = compare_layers(captured, dev, rules, {"atol": 1e-5, "rtol": 1.3e-6})
    results = {row["name"]: row["result"] for row in rows}
    assert results == {"decoder.conv_in#0": "PASS", "decoder.up_blocks.0#0": "FAIL",
                       "decoder.up_blocks.1#0": "FAIL"}
    failing = next(row for row in rows if row["name"] == "decoder.up_blocks.0#0")
    assert "max_abs_err" in failing["message"]
    assert failing["entries"]["max_abs_err"]["verdict"] == "FAIL"
    text = write_compare_csv(tmp_path / "compare.csv", rows).read_text().splitlines()
    assert text[0].split(",")[:2] == ["name", "kind"] and text[0].endswith("result,message")
    assert len(text) == 4 and text[2].startswith("decoder.up_blocks.0#0,layer,")


def test_capture_budget_drops_tensors_beyond_it():
    model = build_tiny_flux2()
    inputs = TASK.make_inputs({"height": 32, "width": 32, "batch_size": 1}, 0)
    with capturing(model, ["decoder.up_blocks.*"], max_bytes=10_000) as capture:
        TASK.run(model, inputs)
    assert capture.dropped and all(n not in capture.tensors for n in capture.dropped)


def test_stat_errors_use_the_tensor_scale_and_flag_new_nans():
    ref = {"max": 1.0, "min": -1.0, "mean": 1e-9, "l2norm": 10.0, "numel": 100, "nonfinite": 0}
    dev = {**ref, "mean": 2e-9}
    assert stats_rel_err(ref, dev, ["mean"]) < 1e-8, "a near-zero mean: judged against the RMS"
    assert math.isinf(stats_rel_err(ref, {**ref, "nonfinite": 3}, ["max"]))


def test_stat_errors_follow_the_nonfinite_agreement_rule():
    """The same overflow on both sides agrees; NaN/Inf on one side only (either side) does not."""
    inf, nan = float("inf"), float("nan")
    ref = {"max": inf, "min": -1.0, "mean": nan, "l2norm": inf, "numel": 100, "nonfinite": 0}
    assert stats_rel_err(ref, dict(ref), ["max", "min", "mean", "l2norm"]) == 0.0
    assert math.isinf(stats_rel_err(ref, {**ref, "max": -inf}, ["max"]))
    assert math.isinf(stats_rel_err(ref, {**ref, "mean": 0.5}, ["mean"]))
    finite = {"max": 1.0, "min": -1.0, "mean": 0.0, "l2norm": 10.0, "numel": 100, "nonfinite": 3}
    lost = {**finite, "nonfinite": 0}
    assert math.isinf(stats_rel_err(finite, lost, ["max"])), "NaN lost on the device"
    assert stats_rel_err(finite, dict(finite), ["max"]) == 0.0


def test_modules_whose_forward_never_runs_are_reported():
    model = build_tiny_flux2()
    inputs = TASK.make_inputs({"height": 32, "width": 32, "batch_size": 1}, 0)
    # decode() never runs the encoder
    with capturing(model, ["encoder", "decoder.mid_block"]) as capture:
        TASK.run(model, inputs)
    assert capture.not_called() == ["encoder"] and "decoder.mid_block#0" in capture.tensors
