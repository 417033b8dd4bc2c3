"""What a run is given, from a record and its report row (no MLflow needed)."""

from __future__ import annotations

import doctest
import math

from ascendbench.tracking import fields, mlflow_export
from ascendbench.tracking.fields import TRUNCATED, Limits, run_fields, safe_key


def test_the_examples_in_the_docstrings_hold():
    for module in (fields, mlflow_export):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_params_are_the_flattened_config_as_typed_on_the_command_line():
    config = {"seed": 42, "dry_run": False, "baseline": {"cache_dir": None},
              "model": {"blocks": [8, 16],
              "source": "/models/flux2", "note": "y" * 600}}
    run = run_fields({"config": config}, {}, Limits(param_value=500))
    assert run.params == {"seed": "42", "dry_run": "false", "baseline.cache_dir": "null",
                          "model.blocks": "[8, 16]",
                          "model.source": "/models/flux2",
                          "model.note": "y" * (500 - len(TRUNCATED)) + TRUNCATED}
    assert run.tags["ascendbench.truncated"] == "model.note"
    assert any("cut to 500 characters" in note for note in run.summary())


def test_metrics_are_the_finite_numbers_of_the_measurement_sections():
    row = {"bench.latency.median_ms": 12.5, "bench.latency.count": 20,
           "metrics.cosine.value": 0.999,
           "metrics.cosine.verdict": "PASS", "metrics.psnr_db.value": math.inf,
           "metrics.ssim.value": math.nan,
           "bench.noise.noisy": False, "hidden.max_abs_err.value": 1e-6, "job.height": 32,
           "env.cpu_count": 2}
    run = run_fields({}, row)
    assert run.metrics == {"bench.latency.median_ms": 12.5, "bench.latency.count": 20.0,
                           "metrics.cosine.value": 0.999, "hidden.max_abs_err.value": 1e-6}
    assert run.tags["ascendbench.nonfinite"] == "metrics.psnr_db.value=inf"


def test_tags_name_the_workload_and_where_the_weights_came_from():
    row = {"verdict": "WARN", "status": "ok", "job.device": "npu", "job.dtype": "bfloat16",
           "job.model": "flux2",
           "job.preset": "balanced", "weights.kind": "loaded", "env.ascendbench": "0.1.0",
           "error.type": None}
    tags = run_fields({}, row).tags
    assert {k: tags[k] for k in ("verdict", "device", "dtype", "model", "preset", "weights",
                                 "ascendbench.version")} \
        == {"verdict": "WARN", "device": "npu", "dtype": "bfloat16", "model": "flux2",
            "preset": "balanced",
            "weights": "loaded", "ascendbench.version": "0.1.0"}
    assert "error" not in tags


def test_keys_mlflow_refuses_are_renamed_and_a_collision_keeps_the_first():
    row = {"metrics.layer/a#0/0/cosine.value": 0.9, "metrics.layer/a_0/0/cosine.value": 0.8}
    run = run_fields({}, row)
    assert run.metrics == {"metrics.layer/a_0/0/cosine.value": 0.9}
    assert (any("collides" in note for note in run.summary())
            and any("renamed" in n for n in run.summary()))
    assert safe_key("a/../b") == "a_.._b" and len(safe_key("k" * 300)) == 250
