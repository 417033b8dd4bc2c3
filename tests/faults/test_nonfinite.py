"""False verdicts and exit statuses: NaN/Inf in the reference, in both runs, in the determinism
check and in a performance-only run. Each test is one case of the issue, planted through
``nonfinite_seams`` (no cache tampering), and fails on the code before the agreement rule and the
output validation."""

from __future__ import annotations

import json
import math

import pytest
import torch

TINY = "model=tiny_flux2_decoder"


def _seam(name: str) -> str:
    return f"model.task._target_=nonfinite_seams.{name}"


def _failing(record: dict) -> set[str]:
    return {name for name, entry in record["metrics"].items() if entry.get("verdict") == "FAIL"}


def test_reference_with_31_percent_nonfinite_fails_with_metric_regression_also_from_cache(
    app, fast, record_of, tmp_path
):
    from nonfinite_seams import REFERENCE_NONFINITE_SHARE

    for run in ("computed", "cached"):
        code, console, job = app(
            TINY,
            _seam("NonfiniteReferenceDecode"),
            "metric=regression",
            *fast,
            out_dir=tmp_path / run,
        )
        record = record_of(job)
        assert code == 1 and record["status"] == "ok", (
            console
        )  # the FAIL verdict exits 1 (fail_on=FAIL default)
        assert record["baseline"]["cache_hit"] is (run == "cached"), run
        assert record["verdict"] == "FAIL", f"{run}: a reference with NaN/Inf must never PASS"
        entry = record["metrics"]["reference_nonfinite"]
        assert entry["verdict"] == "FAIL" and entry["threshold"] == 0, run
        assert entry["fraction"] == pytest.approx(REFERENCE_NONFINITE_SHARE, abs=1e-3)
        assert entry["value"] == round(REFERENCE_NONFINITE_SHARE * entry["numel"])
        assert entry["first_index"] == [0, 0, 0, 0]
        assert "cannot vouch" in entry["source"]
        assert record["metrics"]["nonfinite_mismatch"]["verdict"] == "FAIL", (
            "reference NaN vs device finite disagree"
        )
        assert record["metrics"]["output_nonfinite"]["verdict"] == "PASS", (
            "the device output itself is finite"
        )


def test_overflow_in_the_same_places_agrees_in_every_metric(app, fast, record_of):
    code, console, job = app(
        TINY, _seam("OverflowBothDecode"), *fast
    )  # metric=image: regression + image
    record = record_of(job)
    metrics = record["metrics"]
    assert (
        metrics["nonfinite_mismatch"]["value"] == 0
        and metrics["nonfinite_mismatch"]["verdict"] == "PASS"
    )
    assert metrics["max_abs_err"]["value"] == 0.0 and metrics["mae"]["value"] == 0.0, (
        "no NaN beside mismatch 0"
    )
    assert metrics["cosine"]["value"] == 1.0 and metrics["cosine"]["verdict"] == "PASS"
    assert (
        metrics["image_psnr_db"]["verdict"] == "PASS"
        and metrics["image_nonfinite_mismatch"]["value"] == 0
    )
    assert metrics["allclose_mismatch_ratio"]["value"] == 0.0
    assert record["verdict"] == "FAIL"
    assert _failing(record) == {"reference_nonfinite", "output_nonfinite"}, (
        "the FAIL comes from the findings that say why, not from a NaN metric"
    )
    json.dumps(record, allow_nan=False)


def test_device_only_nan_fails_the_image_metrics_by_the_same_rule(app, fast, record_of):
    code, console, job = app(TINY, _seam("NanOnDeviceOnlyDecode"), *fast)
    metrics = record_of(job)["metrics"]
    count = metrics["output_nonfinite"]["value"]
    assert count > 0 and metrics["nonfinite_mismatch"]["value"] == count
    image = metrics["image_nonfinite_mismatch"]
    assert image["value"] == count and image["verdict"] == "FAIL"
    assert math.isfinite(metrics["image_psnr_db"]["value"]), "the finite pairs still give a PSNR"
    assert metrics["reference_nonfinite"]["verdict"] == "PASS"


@pytest.mark.parametrize("planted", ["inf", "inf_and_nan"])
def test_determinism_check_of_two_identical_overflowing_outputs_passes(planted):
    from nonfinite_seams import OverflowLayer

    from ascendbench.tasks.checks import CheckContext
    from ascendbench.tasks.layer_forward import LayerForwardTask

    class InfOnly(OverflowLayer):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nan_to_num(super().forward(x), nan=float("inf"), posinf=float("inf"))

    layer = OverflowLayer() if planted == "inf_and_nan" else InfOnly()
    task = LayerForwardTask(input_shape=[2, 3, 4])
    inputs = task.make_inputs({}, 0)
    first = {k: v.clone() for k, v in task.run(layer, inputs).items()}
    rules = {"second_run_max_abs_diff": {"max": 0.0, "source": "seed"}}
    entry = task.checks(
        CheckContext(layer, torch.device("cpu"), torch.float32, inputs, first, {}, rules)
    )["determinism/second_run_max_abs_diff"]
    assert entry["value"] == 0.0 and entry["verdict"] == "PASS", entry
    assert entry["details"]["identical"] is True and entry["details"]["nonfinite_mismatch"] == 0

    moved = {"output": first["output"].clone()}
    moved["output"].view(-1)[-2] = float(
        "nan"
    )  # a NaN the second run does not have: a real difference
    entry = task.checks(
        CheckContext(layer, torch.device("cpu"), torch.float32, inputs, moved, {}, rules)
    )["determinism/second_run_max_abs_diff"]
    assert entry["value"] == math.inf and entry["verdict"] == "FAIL"
    assert entry["details"]["identical"] is False and entry["details"]["nonfinite_mismatch"] == 1


def test_performance_only_run_with_nan_output_fails_and_exits_1_under_fail_on(app, fast, record_of):
    from seams import NanOnDeviceDecode

    code, console, job = app("model=nan_tiny", *fast, "baseline.enabled=false", "fail_on=FAIL")
    record = record_of(job)
    assert record["status"] == "ok" and record["verdict"] == "FAIL"
    assert code == 1, "fail_on=FAIL turns the FAIL verdict into exit 1"
    entry = record["metrics"]["output_nonfinite"]
    assert (
        entry["value"] == 2
        and entry["verdict"] == "FAIL"
        and entry["first_index"] == list(NanOnDeviceDecode.NAN_AT)
    )
    assert "output_nonfinite" in console


def test_performance_only_run_with_clean_outputs_keeps_no_verdict(app, fast, record_of):
    code, console, job = app(TINY, *fast, "baseline.enabled=false", "fail_on=WARN")
    record = record_of(job)
    assert code == 0 and record["status"] == "ok"
    assert record["verdict"] is None, "valid outputs alone are no evidence of correctness"
    assert record["metrics"]["output_nonfinite"]["value"] == 0
    ratio = record["metrics"]["output_out_of_range_ratio"]
    assert ratio["verdict"] is None and ratio["would_be"] == "PASS", "random-init: reported only"


def test_performance_only_run_outside_the_task_value_range_is_reported_not_judged(app, fast,
                                                                                   record_of):
    """Random latents through random-init weights are outside the range rule's contract:
    the planted [0, 255] output is reported with what the rule would say; NaN/Inf stay judged."""
    code, console, job = app(TINY, _seam("Scaled255Decode"), *fast, "baseline.enabled=false")
    record = record_of(job)
    entry = record["metrics"]["output_out_of_range_ratio"]
    assert (entry["value"] == 1.0 and entry["would_be"] == "FAIL"
            and entry["value_range"] == [-1.0, 1.0])
    assert entry["verdict"] is None and entry["not_judged"].startswith("random-init weights")
    assert entry["min"] >= 10.0 and entry["max"] <= 265.0
    assert code == 0 and record["verdict"] is None
    assert record["metrics"]["output_nonfinite"]["verdict"] == "PASS"
